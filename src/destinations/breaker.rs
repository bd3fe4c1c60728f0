//! A circuit breaker per destination, as pure state over `now` (ns).
//!
//! Closed, it passes every delivery and remembers the last outcomes. It
//! opens when the last [`trip_after`](BreakerConfig::trip_after) attempts
//! all failed, or when at least [`window`](BreakerConfig::window) attempts
//! were seen and the failed share of the last `window` reaches
//! [`failure_share`](BreakerConfig::failure_share). Open, nothing is sent
//! until the cool-down has passed; then one delivery probes (half-open). A
//! probe that succeeds closes it; one that fails opens it again for twice
//! the cool-down, up to [`max_cool_down`](BreakerConfig::max_cool_down).
//!
//! What counts as a failure: a timeout, a panic, [`Delivery::Failed`] and
//! [`Delivery::Retry`] without a hint. A `Retry` with a hint (429 or 503
//! with `Retry-After`) is a live receiver asking to slow down: the adaptive
//! rate answers it, not the breaker.
//!
//! [`Delivery::Failed`]: crate::Delivery::Failed
//! [`Delivery::Retry`]: crate::Delivery::Retry

use std::time::Duration;

use super::nanos;

/// When a destination's breaker opens and how long it stays open.
///
/// ```
/// use dripfeed::destinations::BreakerConfig;
/// use std::time::Duration;
/// let breaker = BreakerConfig::default()
///     .trip_after(3)
///     .cool_down(Duration::from_secs(2), Duration::from_secs(60));
/// assert_eq!(breaker.trip_after_failures(), 3);
/// assert!(BreakerConfig::default().failure_share(1.5).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    trip_after: u32,
    window: u32,
    failure_share: f64,
    cool_down: Duration,
    max_cool_down: Duration,
}

impl Default for BreakerConfig {
    /// Opens after 5 failures in a row, or half of the last 20; first
    /// cool-down 1 s, doubling while the destination stays down, up to 5 min.
    fn default() -> Self {
        BreakerConfig {
            trip_after: 5,
            window: 20,
            failure_share: 0.5,
            cool_down: Duration::from_secs(1),
            max_cool_down: Duration::from_secs(300),
        }
    }
}

impl BreakerConfig {
    /// Opens after this many failures in a row (1 to 64).
    pub fn trip_after(mut self, failures: u32) -> Self {
        self.trip_after = failures;
        self
    }

    /// The window of last attempts the failure share is taken over (1 to 64).
    pub fn window(mut self, attempts: u32) -> Self {
        self.window = attempts;
        self
    }

    /// Opens when this share of the last `window` attempts failed (0 < share ≤ 1).
    pub fn failure_share(mut self, share: f64) -> Self {
        self.failure_share = share;
        self
    }

    /// The first cool-down, and the most it doubles to.
    pub fn cool_down(mut self, first: Duration, max: Duration) -> Self {
        self.cool_down = first;
        self.max_cool_down = max;
        self
    }

    /// Failures in a row that open the breaker.
    pub fn trip_after_failures(&self) -> u32 {
        self.trip_after
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(1..=64).contains(&self.trip_after) {
            return Err("breaker trip_after must be 1 to 64");
        }
        if !(1..=64).contains(&self.window) {
            return Err("breaker window must be 1 to 64");
        }
        if !(self.failure_share > 0.0 && self.failure_share <= 1.0) {
            return Err("breaker failure share must be in (0, 1]");
        }
        if self.cool_down.is_zero() || self.max_cool_down < self.cool_down {
            return Err("breaker cool-down must be > 0 and at most its maximum");
        }
        Ok(())
    }
}

/// A breaker's state, as the metrics and the stats show it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::destinations::{BreakerConfig, BreakerState, Destinations};
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
///     .breaker(BreakerConfig::default().trip_after(2))
///     .build(|_name: &str| |_: &u32, _| async { Delivery::Failed })?;
/// set.try_submit("down", 1)?;
/// set.try_submit("down", 2)?;
/// tokio::time::sleep(Duration::from_millis(50)).await;
/// let down = set.stats("down").unwrap();
/// assert_eq!((down.breaker(), down.breaker_opened()), (BreakerState::Open, 1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Deliveries pass.
    Closed,
    /// Nothing is sent until the cool-down has passed.
    Open,
    /// One delivery probes the destination.
    HalfOpen,
}

impl BreakerState {
    /// The state's label: `closed`, `open`, `half_open`.
    ///
    /// ```
    /// assert_eq!(dripfeed::destinations::BreakerState::HalfOpen.as_str(), "half_open");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What the drain may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Send as usual.
    Send,
    /// Send one delivery as the probe (then call [`Breaker::probing`]).
    Probe,
    /// Send nothing before this instant, ns.
    Until(u64),
    /// The probe is out: send nothing until it lands.
    Probing,
}

/// What an attempt's end changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Opened,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// `history`: the last outcomes, bit 0 the newest, 1 = failed; `seen` up to 64.
    Closed {
        history: u64,
        seen: u32,
    },
    Open {
        until: u64,
    },
    HalfOpen {
        probing: bool,
    },
}

/// One destination's breaker.
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    cfg: BreakerConfig,
    state: State,
    /// The cool-down the next opening uses, ns.
    cool: u64,
    opened: u64,
}

impl Breaker {
    pub(crate) fn new(cfg: BreakerConfig) -> Self {
        Breaker {
            cfg,
            state: State::Closed {
                history: 0,
                seen: 0,
            },
            cool: nanos(cfg.cool_down),
            opened: 0,
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        match self.state {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Times it opened.
    pub(crate) fn opened(&self) -> u64 {
        self.opened
    }

    /// What the drain may send at `now`.
    pub(crate) fn pass(&self, now: u64) -> Pass {
        match self.state {
            State::Closed { .. } => Pass::Send,
            State::Open { until } if now < until => Pass::Until(until),
            State::Open { .. } | State::HalfOpen { probing: false } => Pass::Probe,
            State::HalfOpen { probing: true } => Pass::Probing,
        }
    }

    /// The probe was sent.
    pub(crate) fn probing(&mut self) {
        self.state = State::HalfOpen { probing: true };
    }

    /// How long until a probe may go, at `now` (zero unless open).
    pub(crate) fn remaining(&self, now: u64) -> Duration {
        match self.state {
            State::Open { until } => Duration::from_nanos(until.saturating_sub(now)),
            _ => Duration::ZERO,
        }
    }

    /// An attempt ended at `now`.
    pub(crate) fn record(&mut self, now: u64, failed: bool) -> Change {
        match self.state {
            State::Closed { history, seen } => {
                let history = (history << 1) | u64::from(failed);
                let seen = (seen + 1).min(64);
                self.state = State::Closed { history, seen };
                if self.trips(history, seen) {
                    self.open(now);
                    return Change::Opened;
                }
                Change::None
            }
            // Deliveries started before it opened: their news is old.
            State::Open { .. } => Change::None,
            State::HalfOpen { .. } if failed => {
                self.cool = self
                    .cool
                    .saturating_mul(2)
                    .min(nanos(self.cfg.max_cool_down));
                self.open(now);
                Change::Opened
            }
            State::HalfOpen { .. } => {
                *self = Breaker {
                    opened: self.opened,
                    ..Breaker::new(self.cfg)
                };
                Change::Closed
            }
        }
    }

    /// A live receiver asked to slow down (a retry with a hint) at `now`:
    /// not a failure, and not counted while closed. A probe answered so
    /// found the receiver alive: the breaker closes (the hint is the
    /// retry's to honour), as the fleet's shared breaker does.
    pub(crate) fn hinted(&mut self, now: u64) -> Change {
        match self.state {
            State::HalfOpen { .. } => self.record(now, false),
            State::Closed { .. } | State::Open { .. } => Change::None,
        }
    }

    fn open(&mut self, now: u64) {
        self.opened += 1;
        self.state = State::Open {
            until: now.saturating_add(self.cool),
        };
    }

    fn trips(&self, history: u64, seen: u32) -> bool {
        let n = self.cfg.trip_after;
        let last = |k: u32| {
            if k >= 64 {
                history
            } else {
                history & ((1u64 << k) - 1)
            }
        };
        if seen >= n && last(n).count_ones() == n {
            return true;
        }
        let w = self.cfg.window;
        seen >= w && f64::from(last(w).count_ones()) >= self.cfg.failure_share * f64::from(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn breaker() -> Breaker {
        Breaker::new(
            BreakerConfig::default()
                .trip_after(3)
                .window(10)
                .failure_share(0.6)
                .cool_down(Duration::from_secs(1), Duration::from_secs(4)),
        )
    }

    #[test]
    fn opens_after_failures_in_a_row_and_probes_after_the_cool_down() {
        let mut b = breaker();
        assert_eq!(b.record(0, true), Change::None);
        assert_eq!(b.record(0, false), Change::None, "a success breaks the run");
        assert_eq!(b.record(0, true), Change::None);
        assert_eq!(b.record(0, true), Change::None);
        assert_eq!(b.pass(0), Pass::Send);
        assert_eq!(b.record(10, true), Change::Opened);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.pass(10), Pass::Until(10 + S));
        assert_eq!(b.remaining(10 + S / 2), Duration::from_millis(500));
        assert_eq!(b.record(20, true), Change::None, "late news while open");
        assert_eq!(b.pass(10 + S), Pass::Probe);
        b.probing();
        assert_eq!(b.pass(10 + S), Pass::Probing);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.record(2 * S, false), Change::Closed);
        assert_eq!(b.pass(2 * S), Pass::Send);
        assert_eq!(b.opened(), 1);
    }

    #[test]
    fn a_probe_answered_with_a_hint_closes_and_hints_never_count_while_closed() {
        let mut b = breaker();
        for t in 0..3 {
            assert_eq!(b.hinted(t), Change::None, "a hint is no failure");
        }
        assert_eq!(b.state(), BreakerState::Closed);
        for t in 0..3 {
            b.record(t, true);
        }
        assert_eq!(b.hinted(3), Change::None, "open: old news");
        assert_eq!(b.pass(3 + S), Pass::Probe);
        b.probing();
        assert_eq!(b.pass(3 + S), Pass::Probing);
        // The probe's answer is a 503 with Retry-After: the receiver lives.
        assert_eq!(b.hinted(4 + S), Change::Closed);
        assert_eq!(b.pass(4 + S), Pass::Send);
        assert_eq!(b.opened(), 1);
    }

    #[test]
    fn a_failed_probe_doubles_the_cool_down_up_to_the_max() {
        let mut b = breaker();
        for _ in 0..3 {
            b.record(0, true);
        }
        let mut now = 0;
        for want in [2, 4, 4] {
            now += 4 * S;
            assert_eq!(b.pass(now), Pass::Probe);
            b.probing();
            assert_eq!(b.record(now, true), Change::Opened);
            assert_eq!(b.pass(now), Pass::Until(now + want * S));
        }
        now += 4 * S;
        b.probing();
        assert_eq!(b.record(now, false), Change::Closed);
        for _ in 0..3 {
            b.record(now, true);
        }
        assert_eq!(
            b.pass(now),
            Pass::Until(now + S),
            "closing resets the cool-down"
        );
        assert_eq!(b.opened(), 5);
    }

    #[test]
    fn opens_on_a_failure_share_over_the_window() {
        let mut b = breaker();
        // fail, fail, ok, repeated: never 3 in a row, 2/3 of the window.
        let mut opened_at = None;
        for i in 0..30 {
            if b.record(0, i % 3 != 2) == Change::Opened {
                opened_at = Some(i);
                break;
            }
        }
        assert_eq!(opened_at, Some(9), "the tenth attempt fills the window");
        let mut healthy = breaker();
        for i in 0..100 {
            assert_eq!(
                healthy.record(0, i % 2 == 0),
                Change::None,
                "half is under 0.6"
            );
        }
    }

    #[test]
    fn invalid_settings_are_refused() {
        assert!(BreakerConfig::default().validate().is_ok());
        assert!(BreakerConfig::default().trip_after(0).validate().is_err());
        assert!(BreakerConfig::default().window(65).validate().is_err());
        let zero = BreakerConfig::default().cool_down(Duration::ZERO, Duration::from_secs(1));
        assert!(zero.validate().is_err());
    }
}
