//! Small helpers every part may use, beneath the domain: a poison-tolerant
//! mutex lock ([`mutex`]), a value swapped whole while read ([`swap`]),
//! the one way the relay opens the files it keeps ([`private`]:
//! owner-only, never through a link), the ordered key-value store the
//! registry and the events store keep on one file ([`kv`]), and systemd's
//! readiness protocol ([`notify`]).

pub(crate) mod kv;
pub(crate) mod mutex;
pub(crate) mod notify;
pub(crate) mod private;
pub(crate) mod swap;
