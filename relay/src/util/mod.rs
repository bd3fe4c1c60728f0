//! Small helpers every part may use, beneath the domain: a poison-tolerant
//! mutex lock ([`mutex`]), a value swapped whole while read ([`swap`]),
//! the one way the relay opens the files it keeps ([`private`]:
//! owner-only, never through a link), and the ordered key-value store
//! the registry and the events store keep on one file ([`kv`]).

pub(crate) mod kv;
pub(crate) mod mutex;
pub(crate) mod private;
pub(crate) mod swap;
