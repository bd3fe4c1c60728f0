//! An event's id: when it was taken, in ns, unique in this process.

use std::sync::atomic::{AtomicU64, Ordering};

/// An event's id: the time it was taken in ns since the Unix epoch, made
/// unique (and increasing) in this process: its place in time order.
pub(crate) fn next_id() -> u64 {
    next_id_after(0)
}

/// [`next_id`], and past `floor`: an application's event takes an id past
/// its `since` (the newest id of the deleted one before it, which a relay
/// whose clock runs ahead may have taken), so it is listed and its key
/// kept, whatever this relay's clock says. The floor moves this process's
/// ids on (they stay unique and increasing): until its clock passes it,
/// every id it takes is past it, so ids name times up to that skew ahead
/// (a recover's window, read in times, sees them that much later).
pub(crate) fn next_id_after(floor: u64) -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    )
    .unwrap_or(u64::MAX);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.saturating_add(1)).max(floor.saturating_add(1));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_past_its_floor_and_the_ids_after_it_too() {
        let now = next_id();
        // An application whose `since` a relay with a clock an hour ahead
        // set: its events' ids are past it all the same.
        let ahead = now + 3_600 * 1_000_000_000;
        let first = next_id_after(ahead);
        assert!(first > ahead);
        let second = next_id_after(ahead);
        assert!(second > first, "unique and increasing");
        assert!(next_id() > second);
        assert!(next_id_after(0) > now);
    }
}
