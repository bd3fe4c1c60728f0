//! An event's id: when it was taken, in ns, unique in this process.

use std::sync::atomic::{AtomicU64, Ordering};

/// An event's id: the time it was taken in ns since the Unix epoch, made
/// unique (and increasing) in this process: its place in time order.
pub(crate) fn next_id() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    )
    .unwrap_or(u64::MAX);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The id a time (ms since the Unix epoch) begins.
pub(crate) fn id_at(unix_ms: u64) -> u64 {
    unix_ms.saturating_mul(1_000_000)
}
