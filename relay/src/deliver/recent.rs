//! Each destination's recent delivery latencies, for the status page's
//! p99: two HDR histograms per destination, the one filling and the last
//! full one, swapped every [`SPAN`]; the p99 is over both, so it covers the
//! last 10 to 20 seconds and never reads empty just after a swap. This
//! relay's deliveries only (with `queue = redis`, each relay shows its own).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

/// How long one histogram fills before it becomes the last one.
pub(crate) const SPAN: Duration = Duration::from_secs(10);

/// One destination's window (`None` only if hdrhistogram ever refused
/// its constant bounds).
pub(crate) struct Window(Mutex<Option<Halves>>);

struct Halves {
    began: Instant,
    filling: Histogram<u64>,
    last: Histogram<u64>,
}

impl Halves {
    /// Swaps the halves when `now` is a span past the filling one's start
    /// (both emptied after two spans of nothing).
    fn at(&mut self, now: Instant) -> &mut Halves {
        let age = now.saturating_duration_since(self.began);
        if age >= SPAN {
            match age >= 2 * SPAN {
                true => self.last.reset(),
                false => std::mem::swap(&mut self.filling, &mut self.last),
            }
            self.filling.reset();
            self.began = now;
        }
        self
    }
}

impl Window {
    /// An empty window starting at `now`.
    pub(crate) fn new(now: Instant) -> Window {
        let histogram = || super::latency::histogram(2);
        Window(Mutex::new(histogram().zip(histogram()).map(
            |(filling, last)| Halves {
                began: now,
                filling,
                last,
            },
        )))
    }

    /// Records a delivery's latency at `now`.
    pub(crate) fn record(&self, now: Instant, latency: Duration) {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = h.as_mut() {
            h.at(now)
                .filling
                .saturating_record(super::latency::micros(latency));
        }
    }

    /// The p99 of the last 10 to 20 s at `now`; `None` without a delivery.
    pub(crate) fn p99(&self, now: Instant) -> Option<Duration> {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let h = h.as_mut()?.at(now);
        let mut both = h.last.clone();
        // Same bounds: adding cannot fail.
        both.add(&h.filling).ok()?;
        (!both.is_empty()).then(|| Duration::from_micros(both.value_at_quantile(0.99)))
    }
}

/// Every destination's window, by name.
#[derive(Default)]
pub(crate) struct Recents(Mutex<HashMap<Arc<str>, Arc<Window>>>);

impl Recents {
    /// `name`'s window, made if new.
    pub(crate) fn of(&self, name: &str) -> Arc<Window> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = all.get(name) {
            return w.clone();
        }
        let w = Arc::new(Window::new(Instant::now()));
        all.insert(Arc::from(name), w.clone());
        w
    }

    /// `name`'s p99 now, if it delivered lately.
    pub(crate) fn p99(&self, name: &str) -> Option<Duration> {
        let w = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)?
            .clone();
        w.p99(Instant::now())
    }

    /// Forgets `name` (a deleted destination).
    pub(crate) fn forget(&self, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
            p99 >= Duration::from_millis(98) && p99 <= Duration::from_millis(101),
            "{p99:?}"
        );
        // A span later the old half still counts; a fast delivery is added.
        let t1 = t0 + SPAN;
        w.record(t1, Duration::from_millis(1));
        assert!(w.p99(t1).unwrap() >= Duration::from_millis(98));
        // Two spans after the slow ones, only the fast one is left.
        let t2 = t1 + SPAN;
        assert!(w.p99(t2).unwrap() <= Duration::from_millis(2));
        // Long quiet: nothing.
        assert_eq!(w.p99(t2 + 3 * SPAN), None);
    }

    #[test]
    fn each_destination_has_its_own_window_until_forgotten() {
        let r = Recents::default();
        let now = Instant::now();
        r.of("a").record(now, Duration::from_millis(40));
        assert!(Arc::ptr_eq(&r.of("a"), &r.of("a")));
        assert!(r.p99("a").is_some());
        assert_eq!(r.p99("b"), None);
        r.forget("a");
        assert_eq!(r.p99("a"), None);
    }
}
