//! How long the local engine keeps events: once a minute (and at start),
//! the ended events past `event_retention` are deleted, then, while the
//! store holds more than `event_retention_bytes`, the oldest ended ones,
//! a few at a time, until it is under the bound (never every ended event
//! at once: the newest stay, down to the bound).

use std::sync::Weak;
use std::time::Duration;

use super::EventStore;

/// How often the store is swept.
pub(crate) const EVERY: Duration = Duration::from_secs(60);

/// The most events one sweep looks at.
const MOST: usize = 1_000;

/// The events the first sweep over the byte bound looks at.
const FIRST: usize = 8;

/// How many of the oldest events the next sweep over the byte bound looks
/// at, after one that looked at `last`: as many as the excess `over` is
/// worth at the bytes an event freed (`freed` by `swept` events), at least
/// one; twice as many as the last when it freed nothing (the oldest still
/// on their way), so a walk past them takes few writes.
pub(crate) fn next_step(last: usize, freed: u64, swept: usize, over: u64) -> usize {
    if swept == 0 || freed == 0 {
        return last.saturating_mul(2).clamp(FIRST, MOST);
    }
    let each = (freed / swept as u64).max(1);
    usize::try_from(over.div_ceil(each))
        .unwrap_or(MOST)
        .clamp(1, MOST)
}

/// Sweeps `store` every [`EVERY`] while it lives, by the clock `now` (ms
/// since the Unix epoch).
pub(crate) async fn sweep(
    store: Weak<EventStore>,
    retention: Duration,
    max_bytes: u64,
    now: fn() -> u64,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        let swept = once(&store, retention, max_bytes, now()).await;
        if swept > 0 {
            tracing::info!(swept, "events past their retention deleted");
        }
    }
}

/// One sweep at `now` (ms since the Unix epoch): how many events went.
async fn once(store: &EventStore, retention: Duration, max_bytes: u64, now: u64) -> usize {
    let before = super::id::id_at(
        now.saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX)),
    );
    // Past its age: every event before `before` whose copies ended (a
    // copy still on its way keeps its event, and the walk goes past it).
    let mut swept = 0;
    let mut from = Some(0);
    while let Some(at) = from {
        match store.sweep(at, before, 10 * MOST).await {
            Ok((n, next)) => (swept, from) = (swept + n, next),
            Err(_) => break,
        }
    }
    // Over its bytes: the oldest ended ones, a step at a time.
    let (mut from, mut step) = (Some(0), FIRST);
    let Ok(mut held) = store.stored_bytes().await else {
        return swept;
    };
    while let Some(at) = from
        && held > max_bytes
    {
        let Ok((n, next)) = store.sweep(at, u64::MAX, step).await else {
            break;
        };
        let Ok(now) = store.stored_bytes().await else {
            break;
        };
        (swept, from) = (swept + n, next);
        step = next_step(
            step,
            held.saturating_sub(now),
            n,
            now.saturating_sub(max_bytes),
        );
        held = now;
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_what_the_excess_is_worth() {
        // Nothing freed: twice the last, within bounds.
        assert_eq!(next_step(8, 0, 0, 1_000_000), 16);
        assert_eq!(next_step(600, 0, 5, 1_000_000), 1_000);
        assert_eq!(next_step(1, 0, 0, 1), FIRST);
        // 1,000 bytes an event, 2,500 over: three more.
        assert_eq!(next_step(8, 8_000, 8, 2_500), 3);
        // Just over: one.
        assert_eq!(next_step(8, 8_000, 8, 1), 1);
        // Far over: at most a thousand.
        assert_eq!(next_step(8, 8_000, 8, u64::MAX), 1_000);
    }
}
