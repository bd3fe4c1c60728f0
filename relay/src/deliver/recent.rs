//! Each destination's recent delivery latencies, for the status page's
//! p99: two tallies per destination (the library's log-bucket
//! [`Tally`]: a few hundred bytes with deliveries, none without), the one
//! filling and the last full one, swapped every [`SPAN`]; the p99 is over
//! both, so it covers the last 10 to 20 seconds and never reads empty just
//! after a swap. This relay's deliveries only (with `queue = redis`, each
//! relay shows its own).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use dripfeed::rate::Tally;
use tokio::time::Instant;

/// How long one histogram fills before it becomes the last one.
pub(crate) const SPAN: Duration = Duration::from_secs(10);

/// One destination's window.
pub(crate) struct Window(Mutex<Halves>);

struct Halves {
    began: Instant,
    filling: Tally,
    last: Tally,
}

impl Halves {
    /// Swaps the halves when `now` is a span past the filling one's start
    /// (both emptied after two spans of nothing).
    fn at(&mut self, now: Instant) -> &mut Halves {
        let age = now.saturating_duration_since(self.began);
        if age >= SPAN {
            self.last = match age >= 2 * SPAN {
                true => Tally::default(),
                false => std::mem::take(&mut self.filling),
            };
            self.filling = Tally::default();
            self.began = now;
        }
        self
    }
}

impl Window {
    /// An empty window starting at `now`.
    pub(crate) fn new(now: Instant) -> Window {
        Window(Mutex::new(Halves {
            began: now,
            filling: Tally::default(),
            last: Tally::default(),
        }))
    }

    /// Records a delivery's latency at `now`.
    pub(crate) fn record(&self, now: Instant, latency: Duration) {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        h.at(now).filling.record(latency);
    }

    /// The p99 of the last 10 to 20 s at `now`; `None` without a delivery.
    pub(crate) fn p99(&self, now: Instant) -> Option<Duration> {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let h = h.at(now);
        let mut both = h.last.clone();
        both.merge(&h.filling);
        let summary = both.summary();
        (summary.samples > 0).then_some(summary.p99)
    }
}

/// Every active destination's window, by name: held by its deliveries
/// while it has work (weakly here), so an idle destination keeps none.
#[derive(Default)]
pub(crate) struct Recents(Mutex<Windows>);

#[derive(Default)]
struct Windows {
    by_name: HashMap<Arc<str>, Weak<Window>>,
    /// Windows made since the map was last swept of those let go.
    made: usize,
}

impl Recents {
    /// `name`'s window, made if it has none.
    pub(crate) fn of(&self, name: &str) -> Arc<Window> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = all.by_name.get(name).and_then(Weak::upgrade) {
            return w;
        }
        let w = Arc::new(Window::new(Instant::now()));
        all.by_name.insert(Arc::from(name), Arc::downgrade(&w));
        all.made += 1;
        if all.made > all.by_name.len() / 2 + 64 {
            all.by_name.retain(|_, w| w.strong_count() > 0);
            all.made = 0;
        }
        w
    }

    /// `name`'s p99 now, if it delivered lately and still has work.
    pub(crate) fn p99(&self, name: &str) -> Option<Duration> {
        let w = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_name
            .get(name)?
            .upgrade()?;
        w.p99(Instant::now())
    }

    /// Forgets `name` (a deleted destination).
    pub(crate) fn forget(&self, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_name
            .remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_covers_the_last_two_spans_and_then_forgets() {
        let t0 = Instant::now();
        let w = Window::new(t0);
        assert_eq!(w.p99(t0), None);
        for ms in 1..=100 {
            w.record(t0, Duration::from_millis(ms));
        }
        let p99 = w.p99(t0).unwrap();
        assert!(
            p99 >= Duration::from_millis(99) && p99 <= Duration::from_millis(106),
            "{p99:?}"
        );
        // A span later the old half still counts; a fast delivery is added.
        let t1 = t0 + SPAN;
        w.record(t1, Duration::from_millis(1));
        assert!(w.p99(t1).unwrap() >= Duration::from_millis(98));
        // Two spans after the slow ones, only the fast one is left.
        let t2 = t1 + SPAN;
        assert!(w.p99(t2).unwrap() <= Duration::from_micros(1_063));
        // Long quiet: nothing.
        assert_eq!(w.p99(t2 + 3 * SPAN), None);
    }

    #[test]
    fn each_destination_has_its_own_window_until_forgotten() {
        let r = Recents::default();
        let now = Instant::now();
        let a = r.of("a");
        a.record(now, Duration::from_millis(40));
        assert!(Arc::ptr_eq(&r.of("a"), &a));
        assert!(r.p99("a").is_some());
        assert_eq!(r.p99("b"), None);
        r.forget("a");
        assert_eq!(r.p99("a"), None);
        // Let go by its deliveries (idle), it is gone, and swept away.
        let b = r.of("b");
        b.record(now, Duration::from_millis(40));
        drop(b);
        assert_eq!(r.p99("b"), None);
        for i in 0..200 {
            drop(r.of(&format!("x{i}")));
        }
        assert!(r.0.lock().unwrap().by_name.len() < 150, "swept");
    }
}
