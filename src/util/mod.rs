//! Small pieces every part uses: the drain's clock, job ids,
//! conversions between durations, nanoseconds and jitter, catching a
//! panic in user code (a downstream, a sink, a hook), and counting the
//! tasks that wait for a wake-up.

pub(crate) mod catch;
pub(crate) mod clock;
pub(crate) mod ids;
pub(crate) mod num;
pub(crate) mod waiting;
