//! Deadline pacing: when the next job is due.
//!
//! tokio's timer fires at millisecond granularity, so the drain cannot sleep
//! once per job at high rates. The pacer keeps the next due instant (ns since
//! the throttle's epoch, with a fractional remainder so the average is exact
//! at any rate) and advances it by `1/R` per emitted job; on each wake the
//! drain emits every job that is due.
//!
//! # The output contract
//!
//! At rate R: at most `max(2, ⌈2R/1000⌉)` jobs in any 1 ms, at most
//! `⌈1.01 R⌉ + 1` in any second, and an exact rate over time on a noisy
//! machine. The rules:
//!
//! - **No credit for idle time.** After idle (or a pause) the schedule
//!   restarts at `now`: the first job goes out at once, the next ones `1/R`
//!   apart, never a burst for the idle time (a leaky bucket, not a token
//!   bucket).
//! - **Keep the debt of a late wake.** tokio's timer fires on whole
//!   milliseconds and then a little late (measured here: median 1.1 ms, p99
//!   2 ms, max 4–12 ms past the deadline asked for). A late wake leaves the
//!   schedule behind; that debt is kept up to [`TIMER_SLACK_NS`] (8 ms of
//!   emissions) and paid back, so the long-run rate is exact. A lag beyond
//!   it is forfeited; so is any lag after the drain was blocked (every
//!   delivery place taken, the fleet out of permits) beyond one tick: a
//!   real stall is never paid back as a burst.
//! - **Cap every millisecond.** The batches emitted in the last millisecond
//!   may hold at most `max(2, ⌈2R/1000⌉)` jobs; debt is paid back within
//!   that, so a late wake never bursts. When the cap is reached the drain
//!   asks for the timer's next tick (not "the oldest batch + 1 ms", which
//!   rounds up to the tick after: at 1,000/s that alone lost 5 %).
//!
//! The second's bound follows: a second holds `R` of the schedule plus at
//! most 8 ms of debt carried into it.
//!
//! The trade, measured (`examples/pacing.rs`, docs/src/benchmarks.md): after a late
//! wake the output runs up to twice the rate until it has caught up, within
//! the millisecond cap. Waking a millisecond early and emitting a little
//! ahead of time was tried too: with a cap below `2R/1000` it could not keep
//! up with the timer's ~2 ms wake period (−5 % at 1,000/s, −28 % at
//! 100,000/s).

/// The timer's granularity, ns.
pub(crate) const TICK_NS: u64 = 1_000_000;

/// How far behind a timer wake may leave the schedule before the rest is
/// forfeited as a stall, ns: debt up to this is kept and paid back within
/// the millisecond cap. 8 ms keeps any second within `1.01 R + 1`.
pub(crate) const TIMER_SLACK_NS: u64 = 8 * TICK_NS;

/// How soon the next job must be due for a drain that outruns its ring to
/// take another turn at once rather than sleep, ns: about what a turn
/// through the scheduler costs. A drain at 500,000/s or more turns
/// without the timer; a slower one with a small ring still sleeps (it
/// would spin between emissions otherwise).
const BUSY_NS: u64 = 2_000;

/// The window the emission cap counts over, ns.
const WINDOW_NS: u64 = TICK_NS;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    next_due: u64,
    /// Fraction of a nanosecond carried to the next advance.
    frac: f64,
    interval: f64,
    last_emit: Option<u64>,
    /// Emissions allowed in any window of 1 ms: `max(2, ⌈2R/1000⌉)`.
    cap: u64,
    /// The batches emitted in the last millisecond: (instant, jobs).
    recent: std::collections::VecDeque<(u64, u64)>,
    /// The jobs in `recent`, summed.
    recent_jobs: u64,
    /// Nothing is emitted before this (a downstream-requested pause). Kept
    /// apart from the schedule, so re-planning for a new rate cannot drop it.
    hold_until: u64,
    /// The units the last emitted job cost beyond one ([`charge`](Self::charge)),
    /// kept when the rate changes.
    last_extra: u32,
}

impl Pacer {
    /// A pacer at `rate` jobs/s whose first job is due at once.
    pub(crate) fn new(rate: f64) -> Self {
        Pacer {
            next_due: 0,
            frac: 0.0,
            interval: interval_ns(rate),
            last_emit: None,
            cap: cap_for(rate),
            recent: std::collections::VecDeque::new(),
            recent_jobs: 0,
            hold_until: 0,
            last_extra: 0,
        }
    }

    /// When the next job is due, ns.
    pub(crate) fn next_due(&self) -> u64 {
        self.next_due.max(self.hold_until)
    }

    /// When the drain should wake next: the next due instant, or, when the
    /// millisecond is full, the timer's next tick (asking for "the oldest
    /// batch + 1 ms" would round up to the tick after it: the timer fires
    /// on whole milliseconds).
    pub(crate) fn next_wake(&self, now: u64) -> u64 {
        if self.room(now) == 0 {
            self.next_due().max(now + 1)
        } else {
            self.next_due()
        }
    }

    /// Whether waiting for the timer would hold the drain below its rate
    /// with jobs waiting in a ring of `bound` places: a tick's worth of
    /// emissions is more than the ring holds (the timer fires on whole
    /// milliseconds, so a drain that sleeps emits at most a ringful once a
    /// millisecond), the next job is due within [`BUSY_NS`], and no cap or
    /// hold stops it.
    pub(crate) fn outruns(&self, now: u64, bound: usize) -> bool {
        self.next_due() <= now.saturating_add(BUSY_NS)
            && TICK_NS as f64 > self.interval * bound as f64
            && self.room(now) > 0
    }

    pub(crate) fn is_due(&self, now: u64) -> bool {
        self.next_due() <= now && self.room(now) > 0
    }

    /// Emissions still allowed at `now` by the millisecond cap.
    fn room(&self, now: u64) -> u64 {
        let window_start = now.saturating_sub(WINDOW_NS);
        // The batches are in time order: only those at the front may have
        // left the window (a busy drain keeps hundreds in it).
        let gone: u64 = self
            .recent
            .iter()
            .take_while(|(at, _)| *at <= window_start)
            .map(|(_, n)| n)
            .sum();
        self.cap.saturating_sub(self.recent_jobs - gone)
    }

    /// Records an emission and schedules the next one `1/R` after this one was due.
    pub(crate) fn emitted(&mut self, now: u64) {
        self.last_emit = Some(now);
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| *at + WINDOW_NS <= now)
        {
            if let Some((_, n)) = self.recent.pop_front() {
                self.recent_jobs -= n;
            }
        }
        match self.recent.back_mut() {
            Some((at, n)) if *at == now => *n += 1,
            _ => self.recent.push_back((now, 1)),
        }
        self.recent_jobs += 1;
        self.last_extra = 0;
        if self.next_due < self.hold_until {
            // The first emission after a hold: the schedule restarts there.
            self.next_due = self.hold_until;
            self.frac = 0.0;
        }
        self.advance(1.0);
    }

    /// Moves the next due instant `intervals` intervals on, carrying the
    /// fraction of a nanosecond.
    fn advance(&mut self, intervals: f64) {
        let step = self.interval * intervals + self.frac;
        let whole = step.floor();
        self.frac = step - whole;
        self.next_due = self.next_due.saturating_add(whole as u64);
    }

    /// The job just emitted costs `extra` units more than one: the next is
    /// due that many intervals later.
    pub(crate) fn charge(&mut self, extra: u32) {
        self.last_extra = extra;
        self.advance(f64::from(extra));
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
        self.cap = cap_for(rate);
        self.frac = 0.0;
        if let Some(last) = self.last_emit {
            let units = 1.0 + f64::from(self.last_extra);
            self.next_due = last.saturating_add((self.interval * units) as u64);
        }
    }
}

/// Emissions allowed in any 1 ms at `rate`: `max(2, ⌈2R/1000⌉)`.
fn cap_for(rate: f64) -> u64 {
    let per_ms = (2.0 * rate / 1000.0).ceil();
    if per_ms.is_finite() && per_ms >= 2.0 {
        per_ms.min(u64::MAX as f64 / 2.0) as u64
    } else {
        2
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

    #[test]
    fn outruns_only_a_ring_below_a_ticks_worth_with_the_next_job_at_hand() {
        let now = 5 * TICK_NS;
        let mut fast = Pacer::new(1e8);
        fast.restart(now);
        fast.emitted(now);
        assert!(fast.outruns(now, 4096), "10 ns apart: 100,000 a tick");
        assert!(!fast.outruns(now, 200_000), "the ring holds a tick's worth");
        let mut slow = Pacer::new(5_000.0);
        slow.restart(now);
        slow.emitted(now);
        assert!(!slow.outruns(now, 2), "200 µs to the next: sleep");
        fast.hold(now + TICK_NS);
        assert!(!fast.outruns(now, 4096), "a downstream's pause is slept");
    }

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

    /// The contract under a timer like tokio's: it fires on the first whole
    /// millisecond at or after the deadline asked for, then 50 µs to 1 ms
    /// late, and now and then stalls for up to 6 ms.
    #[test]
    fn the_output_contract_holds_under_a_noisy_timer() {
        for rate in [3.0, 10.0, 1_000.0, 33_333.0, 100_000.0, 1_000_000.0] {
            let mut rng = fastrand::Rng::with_seed(rate as u64);
            let secs: u64 = if rate < 100.0 { 100 } else { 10 };
            let mut p = Pacer::new(rate);
            let (mut now, mut times) = (0u64, Vec::new());
            while now <= secs * 1_000_000_000 {
                p.clamp(now, TIMER_SLACK_NS);
                while p.is_due(now) {
                    p.emitted(now);
                    times.push(now);
                }
                let asked = p.next_wake(now).max(now + 1);
                let late = if rng.u32(0..2000) == 0 {
                    rng.u64(0..6_000_000)
                } else {
                    rng.u64(50_000..1_000_000)
                };
                now = asked.div_ceil(TICK_NS) * TICK_NS + late;
            }
            let want = rate * secs as f64;
            let off = (times.len() as f64 - want).abs();
            assert!(
                off <= 1.0 + 0.001 * want,
                "rate {rate}: {} vs {want}",
                times.len()
            );
            let most = |width: u64| {
                let (mut most, mut j) = (0, 0);
                for i in 0..times.len() {
                    while j < times.len() && times[j] < times[i] + width {
                        j += 1;
                    }
                    most = most.max(j - i);
                }
                most as f64
            };
            let per_ms = (2.0 * rate / 1000.0).ceil().max(2.0);
            assert!(
                most(TICK_NS) <= per_ms,
                "rate {rate}: {} in 1 ms",
                most(TICK_NS)
            );
            let per_s = (1.01 * rate).ceil() + 1.0;
            assert!(
                most(1_000_000_000) <= per_s,
                "rate {rate}: {} in 1 s",
                most(1_000_000_000)
            );
        }
    }

    #[test]
    fn tiny_rates_do_not_overflow() {
        let mut p = Pacer::new(1e-300);
        p.emitted(0);
        p.emitted(1);
        assert!(p.next_due() > 1_000_000_000_000);
    }
}
