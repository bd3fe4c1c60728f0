//! Small pieces every part uses: the drain's clock, job ids,
//! conversions between durations, nanoseconds and jitter, and catching a
//! panic in user code (a downstream, a sink, a hook).

pub(crate) mod catch;
pub(crate) mod clock;
pub(crate) mod ids;
pub(crate) mod num;
