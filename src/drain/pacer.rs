//! Deadline pacing: when the next job is due.
//!
//! tokio's timer fires at millisecond granularity, so the drain cannot sleep
//! once per job at high rates. The pacer keeps the next due instant (ns since
//! the throttle's epoch, with a fractional remainder so the average is exact
//! at any rate) and advances it by `1/R` per emitted job; on each wake the
//! drain emits every job that is due.
//!
//! Two rules keep the output a leaky bucket, not a token bucket:
//! - after idle (or a pause) the schedule restarts at `now`: the first job
//!   goes out at once, the next ones `1/R` apart, never a burst for the idle
//!   time;
//! - when the drain falls behind with jobs waiting (all delivery slots busy,
//!   no shared permit), the schedule is clamped to `now - tick`, so catching
//!   up never bursts more than one tick's worth. Exactness yields to this
//!   no-burst rule.
//!
//! A timer wake that is merely late is not falling behind: tokio's
//! millisecond wheel rounds a deadline up and then fires with some latency
//! (measured here: median 1.1 ms, p90 1.7 ms late), so clamping every late
//! wake to one tick would forfeit a slice of every interval (8.7 % at
//! 1,000/s). After a timer wake the clamp allows [`TIMER_SLACK_NS`] instead;
//! a longer delay (a stalled runtime) is clamped to that.

/// The timer's granularity, ns.
pub(crate) const TICK_NS: u64 = 1_000_000;

/// How late a timer wake may be before it counts as a stall, ns.
pub(crate) const TIMER_SLACK_NS: u64 = 2 * TICK_NS;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    next_due: u64,
    /// Fraction of a nanosecond carried to the next advance.
    frac: f64,
    interval: f64,
    last_emit: Option<u64>,
    /// Nothing is emitted before this (a downstream-requested pause). Kept
    /// apart from the schedule, so re-planning for a new rate cannot drop it.
    hold_until: u64,
}

impl Pacer {
    /// A pacer at `rate` jobs/s whose first job is due at once.
    pub(crate) fn new(rate: f64) -> Self {
        Pacer {
            next_due: 0,
            frac: 0.0,
            interval: interval_ns(rate),
            last_emit: None,
            hold_until: 0,
        }
    }

    /// When the next job is due, ns.
    pub(crate) fn next_due(&self) -> u64 {
        self.next_due.max(self.hold_until)
    }

    pub(crate) fn is_due(&self, now: u64) -> bool {
        self.next_due() <= now
    }

    /// Records an emission and schedules the next one `1/R` after this one was due.
    pub(crate) fn emitted(&mut self, now: u64) {
        self.last_emit = Some(now);
        if self.next_due < self.hold_until {
            // The first emission after a hold: the schedule restarts there.
            self.next_due = self.hold_until;
            self.frac = 0.0;
        }
        let step = self.interval + self.frac;
        let whole = step.floor();
        self.frac = step - whole;
        self.next_due = self.next_due.saturating_add(whole as u64);
    }

    /// The queue was empty (or emission paused): no credit for the idle time.
    pub(crate) fn restart(&mut self, now: u64) {
        if self.next_due < now {
            self.next_due = now;
            self.frac = 0.0;
        }
    }

    /// Jobs waited: catch up by at most `allowance` ns (one tick after
    /// being blocked, [`TIMER_SLACK_NS`] after a late timer wake).
    pub(crate) fn clamp(&mut self, now: u64, allowance: u64) {
        let floor = now.saturating_sub(allowance);
        if self.next_due < floor {
            self.next_due = floor;
            self.frac = 0.0;
        }
    }

    /// Emits nothing before `until` (the downstream asked for a pause).
    pub(crate) fn hold(&mut self, until: u64) {
        self.hold_until = self.hold_until.max(until);
    }

    /// A new rate, effective from the next emission: due `1/R_new` after the
    /// last one.
    pub(crate) fn set_rate(&mut self, rate: f64) {
        self.interval = interval_ns(rate);
        self.frac = 0.0;
        if let Some(last) = self.last_emit {
            self.next_due = last.saturating_add(self.interval as u64);
        }
    }
}

/// `1/rate` in ns, saturating for tiny rates.
fn interval_ns(rate: f64) -> f64 {
    let ns = 1e9 / rate;
    if ns.is_finite() {
        ns.min(u64::MAX as f64 / 4.0)
    } else {
        u64::MAX as f64 / 4.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a pacer with a full queue, waking every `tick` ns, and counts emissions.
    fn emitted_in(pacer: &mut Pacer, start: u64, end: u64, tick: u64) -> u64 {
        let mut n = 0;
        let mut now = start;
        while now <= end {
            pacer.clamp(now, TICK_NS);
            while pacer.is_due(now) {
                pacer.emitted(now);
                n += 1;
            }
            now += tick;
        }
        n
    }

    #[test]
    fn exact_average_at_any_rate() {
        for rate in [0.1, 3.0, 7.0, 1000.0, 333_333.0, 1_000_000.0] {
            let mut p = Pacer::new(rate);
            let secs = if rate < 1.0 { 100 } else { 10 };
            let n = emitted_in(&mut p, 0, secs * 1_000_000_000, TICK_NS);
            let want = rate * secs as f64;
            assert!(
                (n as f64 - want).abs() <= 1.0 + 1e-9 * want,
                "rate {rate}: {n} vs {want}"
            );
        }
    }

    #[test]
    fn no_burst_after_idle() {
        let mut p = Pacer::new(10.0);
        p.emitted(0);
        // idle for 10 s, then jobs arrive
        let now = 10_000_000_000;
        p.restart(now);
        assert!(p.is_due(now));
        p.emitted(now);
        assert!(!p.is_due(now), "second job waits 1/R");
        assert_eq!(p.next_due(), now + 100_000_000);
    }

    #[test]
    fn catch_up_bursts_at_most_one_tick() {
        let mut p = Pacer::new(1_000_000.0);
        p.emitted(0);
        // stalled for 50 ms with jobs waiting
        let now = 50_000_000;
        p.clamp(now, TICK_NS);
        let mut burst = 0;
        while p.is_due(now) {
            p.emitted(now);
            burst += 1;
        }
        assert!(burst <= 1001, "burst {burst}");
    }

    #[test]
    fn rate_change_applies_from_last_emission() {
        let mut p = Pacer::new(1.0);
        p.emitted(0);
        assert_eq!(p.next_due(), 1_000_000_000);
        p.set_rate(100.0);
        assert_eq!(p.next_due(), 10_000_000);
    }

    #[test]
    fn a_rate_change_keeps_a_hold() {
        let mut p = Pacer::new(10.0);
        p.emitted(0);
        p.hold(10_000_000_000);
        p.set_rate(5.0);
        assert_eq!(
            p.next_due(),
            10_000_000_000,
            "the hold outlives the new rate"
        );
        assert!(!p.is_due(9_999_999_999));
        p.emitted(10_000_000_000);
        assert_eq!(p.next_due(), 10_200_000_000, "then 1/R apart, no burst");
    }

    #[test]
    fn tiny_rates_do_not_overflow() {
        let mut p = Pacer::new(1e-300);
        p.emitted(0);
        p.emitted(1);
        assert!(p.next_due() > 1_000_000_000_000);
    }
}
