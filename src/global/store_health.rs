//! Health of a fleet's shared store as one handle sees it: failed calls
//! counted in [`GLOBAL_ERRORS`](crate::accounting::metrics::GLOBAL_ERRORS), the
//! fallback published in [`GLOBAL_FALLBACK`](crate::accounting::metrics::GLOBAL_FALLBACK),
//! and a pause between probes so a hanging store does not cost every call
//! its full timeout.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics::{Counter, Gauge};
use tokio::time::Instant;

/// One handle's view of its store.
pub(crate) struct StoreHealth {
    errors: Counter,
    fallback: Gauge,
    /// While set and in the future, calls skip the store.
    down_until: Mutex<Option<Instant>>,
    /// Whether `down_until` is set: a healthy store's calls read only this.
    down: AtomicBool,
    probe_interval: Duration,
}

impl StoreHealth {
    /// Healthy; metrics labelled `throttle = name`.
    pub(crate) fn new(name: &str, probe_interval: Duration) -> Self {
        crate::accounting::metrics::describe_once();
        let errors = metrics::counter!(crate::accounting::metrics::GLOBAL_ERRORS, "throttle" => name.to_owned());
        let fallback = metrics::gauge!(crate::accounting::metrics::GLOBAL_FALLBACK, "throttle" => name.to_owned());
        fallback.set(0.0);
        Self {
            errors,
            fallback,
            down_until: Mutex::new(None),
            down: AtomicBool::new(false),
            probe_interval,
        }
    }

    /// The same health with another pause between probes.
    pub(crate) fn set_probe_interval(&mut self, probe_interval: Duration) {
        self.probe_interval = probe_interval;
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        match self.down_until.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Whether a call should try the store now: it is healthy, or the pause
    /// after its last failure is over (this call is the probe).
    pub(crate) fn should_try(&self) -> bool {
        if !self.down.load(Ordering::Acquire) {
            return true;
        }
        let mut slot = self.slot();
        match *slot {
            Some(until) if Instant::now() < until => false,
            Some(_) => {
                // Let one probe through; others wait for its answer.
                *slot = Some(Instant::now() + self.probe_interval);
                true
            }
            None => true,
        }
    }

    /// A call failed: count it and pause the store until the next probe.
    pub(crate) fn failed(&self) {
        self.errors.increment(1);
        self.fallback.set(1.0);
        let mut slot = self.slot();
        *slot = Some(Instant::now() + self.probe_interval);
        self.down.store(true, Ordering::Release);
    }

    /// A call succeeded: the store is back.
    pub(crate) fn succeeded(&self) {
        if !self.down.load(Ordering::Acquire) {
            return;
        }
        let mut slot = self.slot();
        if slot.take().is_some() {
            self.down.store(false, Ordering::Release);
            self.fallback.set(0.0);
        }
    }

    /// Whether the store is considered down.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pauses_then_probes_once() {
        let h = StoreHealth::new("t", Duration::from_secs(1));
        assert!(h.should_try() && !h.is_down());
        h.failed();
        assert!(h.is_down() && !h.should_try());
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert!(h.should_try(), "the probe");
        assert!(!h.should_try(), "one probe at a time");
        h.succeeded();
        assert!(!h.is_down() && h.should_try());
    }
}
