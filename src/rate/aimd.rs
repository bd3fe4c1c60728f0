//! The AIMD controller (see [`Aimd`] for the mechanism).

use std::error::Error;
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use super::summary::WindowSummary;

/// Longest pause a [`Decision`] suggests, whatever the downstream's hint.
///
/// ```
/// assert_eq!(dripfeed::rate::MAX_PAUSE.as_secs(), 60);
/// ```
pub const MAX_PAUSE: Duration = Duration::from_secs(60);
/// Largest start-up step (no reference rate yet), as a share of the rate.
const STARTUP_STEP: f64 = 0.12;
/// Below the reference rate, a step covers this share of the distance to it.
const APPROACH: f64 = 0.5;
/// Smallest step below the reference rate, as a share of `increase`.
const MIN_STEP: f64 = 0.10;
/// Probe step above the reference rate, as a share of it.
const PROBE_STEP: f64 = 0.01;
/// A p99 rise (or fall) above this share of the target per interval counts
/// as a building (or draining) queue.
const RISE: f64 = 0.10;
/// A latency cut also removes the p99 above the target within about this
/// many seconds.
const DRAIN_SECS: f64 = 2.0;
/// A p99 above the target that is draining holds only if, at the pace it
/// drains, it is back under the target within about this many seconds;
/// slower than that (a rate a hair under the capacity, a deep queue) it is
/// cut anyway.
const DRAIN_HORIZON: f64 = 8.0;
/// Within a cooldown, a signal this much worse than at the cut cuts again.
const ESCALATION: f64 = 1.25;
/// A downstream delivering this much more than the rate sends is draining
/// a queue built before: a p99 still above the target holds the rate.
const DRAINING: f64 = 1.02;
/// A downstream delivering less than this share of the rate is overrun far
/// past its capacity: the cut goes under what it delivers. (Near the
/// capacity the window's throughput still holds seconds from before the
/// rate crossed it, and would read low.)
const OVERRUN: f64 = 0.8;

/// An invalid [`AimdConfig`] value.
///
/// ```
/// use dripfeed::rate::{AimdConfig, AimdError};
/// let err = AimdConfig::default().with_increase(-1.0).build().unwrap_err();
/// assert_eq!(err, AimdError::Increase(-1.0));
/// assert_eq!(err.to_string(), "increase must be finite and above zero, got -1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AimdError {
    /// The floor was not finite and positive.
    Floor(f64),
    /// The ceiling was not finite and positive.
    Ceiling(f64),
    /// The floor was above the ceiling.
    FloorAboveCeiling {
        /// The floor given.
        floor: f64,
        /// The ceiling given.
        ceiling: f64,
    },
    /// The target p99 was zero.
    ZeroTarget,
    /// The decrease factor was not strictly between 0 and 1.
    Decrease(f64),
    /// The gentle decrease was not in `[decrease, 1)`.
    GentleDecrease(f64),
    /// The increase was not finite and positive.
    Increase(f64),
    /// The interval was zero.
    ZeroInterval,
    /// The failure-share threshold was not in `[0, 1]`.
    FailureThreshold(f64),
}

impl fmt::Display for AimdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Floor(v) => write!(f, "floor must be finite and above zero, got {v}"),
            Self::Ceiling(v) => write!(f, "ceiling must be finite and above zero, got {v}"),
            Self::FloorAboveCeiling { floor, ceiling } => {
                write!(f, "floor {floor} is above ceiling {ceiling}")
            }
            Self::ZeroTarget => f.write_str("target p99 must be above zero"),
            Self::Decrease(v) => write!(f, "decrease must be between 0 and 1, got {v}"),
            Self::GentleDecrease(v) => {
                write!(f, "gentle decrease must be in [decrease, 1), got {v}")
            }
            Self::Increase(v) => write!(f, "increase must be finite and above zero, got {v}"),
            Self::ZeroInterval => f.write_str("interval must be above zero"),
            Self::FailureThreshold(v) => {
                write!(f, "failure threshold must be in [0, 1], got {v}")
            }
        }
    }
}

impl Error for AimdError {}

/// Settings of the [`Aimd`] controller, built with `with_*` setters and
/// checked by [`AimdConfig::build`].
///
/// Defaults: floor 20/s, ceiling 200/s, target p99 150 ms, decrease ×0.75,
/// gentle decrease ×0.97, increase +10/s, interval 1 s, failure threshold
/// 5 %, at least 20 samples, cooldown 6 s.
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::{AimdConfig, AimdError};
/// let aimd = AimdConfig::default().with_floor(5.0).with_ceiling(50.0).build()?;
/// assert_eq!(aimd.config().ceiling(), 50.0);
/// let err = AimdConfig::default().with_floor(300.0).build().unwrap_err();
/// assert_eq!(err, AimdError::FloorAboveCeiling { floor: 300.0, ceiling: 200.0 });
/// # Ok::<(), AimdError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AimdConfig {
    floor: f64,
    ceiling: f64,
    target_p99: Duration,
    decrease: f64,
    gentle_decrease: f64,
    increase: f64,
    interval: Duration,
    failure_threshold: f64,
    min_samples: u64,
    cooldown: Duration,
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self {
            floor: 20.0,
            ceiling: 200.0,
            target_p99: Duration::from_millis(150),
            decrease: 0.75,
            gentle_decrease: 0.97,
            increase: 10.0,
            interval: Duration::from_secs(1),
            failure_threshold: 0.05,
            min_samples: 20,
            cooldown: Duration::from_secs(6),
        }
    }
}

macro_rules! accessors {
    ($($(#[$doc:meta])* $field:ident / $setter:ident: $ty:ty;)*) => {
        impl AimdConfig {
            $(
                $(#[$doc])*
                ///
                #[doc = concat!(
                    "```\nlet c = dripfeed::rate::AimdConfig::default();\n",
                    "assert_eq!(c.clone().", stringify!($setter), "(c.", stringify!($field), "()), c);\n```"
                )]
                pub fn $setter(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }

                $(#[$doc])*
                ///
                #[doc = concat!(
                    "```\nlet a = dripfeed::rate::AimdConfig::default().build()?;\n",
                    "assert_eq!(a.config().", stringify!($field), "(), dripfeed::rate::AimdConfig::default().",
                    stringify!($field), "());\n# Ok::<(), dripfeed::rate::AimdError>(())\n```"
                )]
                pub fn $field(&self) -> $ty {
                    self.$field
                }
            )*
        }
    };
}

accessors! {
    /// Lowest rate, jobs per second (default 20).
    floor / with_floor: f64;
    /// Highest rate, jobs per second (default 200).
    ceiling / with_ceiling: f64;
    /// p99 latency above which the rate is cut (default 150 ms).
    target_p99 / with_target_p99: Duration;
    /// Deepest cut factor, used for failures and congestion (default 0.75).
    decrease / with_decrease: f64;
    /// Shallowest cut factor: a latency cut lands this share under the
    /// capacity the p99's growth implies (default 0.97).
    gentle_decrease / with_gentle_decrease: f64;
    /// Largest additive step, jobs per second (default 10).
    increase / with_increase: f64;
    /// Time between decisions (default 1 s).
    interval / with_interval: Duration;
    /// Failure share above which the rate is cut (default 0.05).
    failure_threshold / with_failure_threshold: f64;
    /// Successes a window needs before latency is judged (default 20).
    min_samples / with_min_samples: u64;
    /// Hold after a cut, unless things get worse (default 6 s).
    cooldown / with_cooldown: Duration;
}

impl AimdConfig {
    /// Checks every value and returns a controller.
    ///
    /// ```
    /// use dripfeed::rate::{AimdConfig, AimdError};
    /// let bad = AimdConfig::default().with_decrease(1.0).build();
    /// assert_eq!(bad.unwrap_err(), AimdError::Decrease(1.0));
    /// assert!(AimdConfig::default().build().is_ok());
    /// ```
    pub fn build(self) -> Result<Aimd, AimdError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.floor) {
            return Err(AimdError::Floor(self.floor));
        }
        if !positive(self.ceiling) {
            return Err(AimdError::Ceiling(self.ceiling));
        }
        if self.floor > self.ceiling {
            return Err(AimdError::FloorAboveCeiling {
                floor: self.floor,
                ceiling: self.ceiling,
            });
        }
        if self.target_p99.is_zero() {
            return Err(AimdError::ZeroTarget);
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0) {
            return Err(AimdError::Decrease(self.decrease));
        }
        if !(self.gentle_decrease >= self.decrease && self.gentle_decrease < 1.0) {
            return Err(AimdError::GentleDecrease(self.gentle_decrease));
        }
        if !positive(self.increase) {
            return Err(AimdError::Increase(self.increase));
        }
        if self.interval.is_zero() {
            return Err(AimdError::ZeroInterval);
        }
        if !(0.0..=1.0).contains(&self.failure_threshold) {
            return Err(AimdError::FailureThreshold(self.failure_threshold));
        }
        Ok(Aimd {
            cfg: self,
            last_decision: None,
            last_cut: None,
            reference: None,
            prev_p99: None,
            probes: 0,
        })
    }
}

/// What a cut reacts to.
///
/// ```
/// use dripfeed::rate::{Action, AimdConfig, Signal, WindowSummary};
/// let w = WindowSummary { congestion: 1, ..Default::default() };
/// let d = AimdConfig::default().build()?.decide(tokio::time::Instant::now(), 80.0, &w, false);
/// assert_eq!(d.action, Action::Decrease { reason: Signal::Congestion });
/// # Ok::<(), dripfeed::rate::AimdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// p99 above the target.
    Latency,
    /// Failure share above the threshold.
    Failures,
    /// The downstream answered "slow down" (429 or 503).
    Congestion,
}

/// Why the rate did not move.
///
/// ```
/// use dripfeed::rate::{Action, AimdConfig, HoldReason, WindowSummary};
/// let d = AimdConfig::default().build()?.decide(tokio::time::Instant::now(), 80.0, &WindowSummary::default(), false);
/// assert_eq!(d.action, Action::Hold { reason: HoldReason::Idle });
/// # Ok::<(), dripfeed::rate::AimdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// Less than one interval since the previous decision.
    TooSoon,
    /// Within the cooldown after a cut.
    Cooldown,
    /// A bad signal, but the rate is already at the floor.
    AtFloor,
    /// Already at the ceiling.
    AtCeiling,
    /// The drain was not busy: no evidence that more rate is needed.
    Idle,
    /// Too few samples to judge the latency.
    TooFewSamples,
    /// p99 is rising: a queue is building downstream.
    LatencyRising,
    /// p99 is above the target but falling: the downstream's queue is
    /// already draining, so no cut is needed.
    LatencyFalling,
}

/// The direction of a [`Decision`] and why.
///
/// ```
/// use dripfeed::rate::{Action, Signal};
/// let a = Action::Decrease { reason: Signal::Failures };
/// assert!(matches!(a, Action::Decrease { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Additive increase.
    Increase,
    /// Multiplicative decrease.
    Decrease {
        /// The signal that caused the cut.
        reason: Signal,
    },
    /// No change.
    Hold {
        /// Why not.
        reason: HoldReason,
    },
}

/// The outcome of [`Aimd::decide`]: the rate to use from now on.
///
/// ```
/// use dripfeed::rate::{Action, Decision, HoldReason};
/// let d = Decision { rate: 42.0, action: Action::Hold { reason: HoldReason::Idle }, pause: None };
/// assert!(!d.changed());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The new rate, jobs per second, within `[floor, ceiling]`.
    pub rate: f64,
    /// What happened and why.
    pub action: Action,
    /// On a congestion cut with a `Retry-After` hint: emit nothing for this
    /// long (at most [`MAX_PAUSE`]), then resume at `rate`.
    pub pause: Option<Duration>,
}

impl Decision {
    /// Whether the rate moved.
    ///
    /// ```
    /// use dripfeed::rate::{Action, Decision};
    /// assert!(Decision { rate: 30.0, action: Action::Increase, pause: None }.changed());
    /// ```
    pub fn changed(&self) -> bool {
        !matches!(self.action, Action::Hold { .. })
    }
}

/// The window's state at the last cut, to tell "still the same evidence"
/// from "worse".
#[derive(Debug, Clone, Copy)]
struct Cut {
    at: Instant,
    p99: Duration,
    failure_share: f64,
    congestion: u64,
}

/// The AIMD drain-rate controller. Pure: time and evidence are arguments.
///
/// The AIMD controller: a pure function of the clock, the current rate and a
/// [`WindowSummary`], deciding the next drain rate once per interval.
///
/// ```
/// use dripfeed::rate::{Action, AimdConfig};
/// use dripfeed::rate::WindowSummary;
/// let mut aimd = AimdConfig::default().build()?;
/// let d = aimd.decide(tokio::time::Instant::now(), 100.0, &WindowSummary::default(), true);
/// assert!(matches!(d.action, Action::Hold { .. }), "no samples, no evidence");
/// # Ok::<(), dripfeed::rate::AimdError>(())
/// ```
///
/// # Mechanism
///
/// Every `interval` the controller looks at the window:
///
/// * **Cut** (multiplicative decrease) when the downstream said "slow down"
///   (congestion answers), when the failure share exceeds the threshold, or
///   when p99 exceeds the target *or will by the next decision*: p99 is
///   projected one interval ahead at the rise seen since the previous
///   decision, so a growing downstream queue is cut near the target instead
///   of one interval past it. Failures and congestion cut by `decrease`
///   (×0.75).
/// * **A latency cut lands just under the capacity.** When the rate `R`
///   overruns a downstream of capacity `C`, its queue (and so the p99)
///   grows by `g = (R − C) / C` seconds of wait per second. The controller
///   reads `g` from the p99's rise since the previous decision, so the
///   capacity it implies is `R / (1 + g)`, and cuts to
///   `R × (gentle_decrease / (1 + g) − (p99 − target) / 2 s)`: 3 % under
///   the implied capacity (`gentle_decrease` ×0.97), less enough to drain
///   the p99 above the target within about 2 s; never deeper than
///   `decrease` (×0.75). A p99 just over the target and not rising cuts by
///   3 %; a rise of 240 ms in a second cuts by 25 %.
/// * **What the downstream delivers.** When the deliveries in flight bound
///   the downstream's queue, its p99 stops growing however far the rate
///   overruns it, and `g` reads zero. So when the window's `throughput`
///   (successes per second) is below 80 % of the rate, it is the capacity,
///   and the cut lands under it too: at most `throughput × (0.97 − (p99 − target) /
///   2 s)`. And a p99 above the target while the downstream delivers 2 %
///   more than the rate sends holds: the queue behind it is draining, and
///   a cut would only take the rate under the capacity. Either hold lasts
///   only while the queue drains fast enough to bring the p99 under the
///   target within about 8 s; a rate a hair under the capacity drains a
///   deep queue for minutes, and is cut.
/// * **Cooldown.** For `cooldown` after a cut (default 6 s: one 5 s window
///   plus one interval) the window still holds the samples that caused it, so
///   the controller neither cuts again for the same evidence nor increases.
///   It cuts again within the cooldown only if the signal got clearly worse
///   (p99, failure share or congestion count 25 % above their values at the
///   cut), which walks the rate down quickly during an outage. After the
///   cooldown, a p99 still above the target but falling (by more than 10 %
///   of the target since the previous decision) holds: the downstream's
///   queue is already draining.
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::{Action, AimdConfig, HoldReason, WindowSummary};
/// use tokio::time::Instant;
/// let mut aimd = AimdConfig::default().build()?;
/// let now = Instant::now();
/// // 140/s sent, 80/s delivered, p99 flat at 350 ms (the queue is bounded).
/// let overrun = WindowSummary { samples: 400, p99: Duration::from_millis(350), throughput: 80.0, ..Default::default() };
/// let d = aimd.decide(now, 140.0, &overrun, true);
/// assert!((d.rate - 80.0 * (0.97 - 0.1)).abs() < 1e-9, "{d:?}");
/// // Later, 70/s sent and 80/s delivered: draining, held.
/// let draining = WindowSummary { throughput: 80.0, ..overrun };
/// let d = aimd.decide(now + Duration::from_secs(7), 70.0, &draining, true);
/// assert_eq!(d.action, Action::Hold { reason: HoldReason::LatencyFalling });
/// # Ok::<(), dripfeed::rate::AimdError>(())
/// ```
/// * **Memory of the knee.** A latency cut outside a cooldown remembers the
///   capacity it implied, a congestion cut the rate it cut from: the
///   *reference rate*, where the downstream last ran out of capacity.
///   Failure cuts leave it alone (an outage says nothing about capacity).
/// * **Increase** (additive) only when the drain was busy and the window had
///   at least `min_samples` successes. Below the reference rate a step covers
///   half the distance to it (at least 10 % of `increase`, at most
///   `increase`) and never passes it, so recovery from far below is fast and
///   the approach is slow. At or above the reference the controller probes
///   by 1 % of it, one more percent for each further increase, never more
///   than `increase` (so a capacity that grew is found within seconds). With
///   no reference yet (start-up) a step is at most 12 % of the current rate,
///   so that even two steps past the capacity (the first too small to show
///   in the latency) stay below 1.15 × capacity.
/// * **Rising latency holds.** If p99 rose by more than 10 % of the target
///   since the previous decision, a queue is building downstream: the rate
///   holds instead of rising into it.
///
/// Together these keep the troughs high: the controller spends its time
/// just under the capacity, crosses it slowly (so latency grows slowly and
/// the projection catches it near the target), and then cuts to about
/// 0.97 C. While the queue built above the capacity drains, the downstream
/// still delivers at C. In the closed-loop simulation (`sim`) against a
/// downstream of capacity C, the rate then oscillates within about
/// [0.97 C, 1.03 C] and averages about 0.99 C, with p99 near the target;
/// deliveries per second stay within [0.96 C, C]. Against a real thread-pool
/// receiver (`examples/aimd_real.rs`, 6 workers × 50 ms) deliveries per
/// second average about 0.99 C.
/// Rates are always clamped to `[floor, ceiling]`, and a bad window at the
/// floor holds rather than cutting further.
///
/// # Retry-After
///
/// A congestion cut also carries the window's largest `Retry-After` hint as
/// [`Decision::pause`] (capped at [`MAX_PAUSE`]): the drain should emit
/// nothing for that long, then resume at the new rate. Only the cut carries
/// it, so one hint pauses once, not at every decision while it stays in the
/// window.
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::{Action, AimdConfig, Signal};
/// use dripfeed::rate::WindowSummary;
/// use tokio::time::Instant;
///
/// let mut aimd = AimdConfig::default().build()?;
/// let t0 = Instant::now();
/// let slow = WindowSummary { samples: 500, p99: Duration::from_millis(400), ..Default::default() };
/// // Not rising (no previous decision): 3 % under the rate, less 250 ms
/// // above the target drained over 2 s (12.5 %).
/// let d = aimd.decide(t0, 100.0, &slow, true);
/// assert_eq!(d.action, Action::Decrease { reason: Signal::Latency });
/// assert!((d.rate - 84.5).abs() < 1e-9);
/// assert_eq!(aimd.reference_rate(), Some(100.0));
/// // Within the cooldown p99 rose 200 ms in a second: the deepest cut, ×0.75.
/// let worse = WindowSummary { p99: Duration::from_millis(600), ..slow };
/// let d = aimd.decide(t0 + Duration::from_secs(1), 84.5, &worse, true);
/// assert!((d.rate - 84.5 * 0.75).abs() < 1e-9);
/// # Ok::<(), dripfeed::rate::AimdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Aimd {
    cfg: AimdConfig,
    last_decision: Option<Instant>,
    last_cut: Option<Cut>,
    reference: Option<f64>,
    prev_p99: Option<Duration>,
    probes: u32,
}

impl Aimd {
    /// The settings in use.
    ///
    /// ```
    /// let aimd = dripfeed::rate::AimdConfig::default().build()?;
    /// assert_eq!(aimd.config().floor(), 20.0);
    /// # Ok::<(), dripfeed::rate::AimdError>(())
    /// ```
    pub fn config(&self) -> &AimdConfig {
        &self.cfg
    }

    /// The rate the last capacity cut (latency or congestion) started from,
    /// if any: where the downstream last ran out of room.
    ///
    /// ```
    /// let aimd = dripfeed::rate::AimdConfig::default().build()?;
    /// assert_eq!(aimd.reference_rate(), None);
    /// # Ok::<(), dripfeed::rate::AimdError>(())
    /// ```
    pub fn reference_rate(&self) -> Option<f64> {
        self.reference
    }

    /// Takes over from another controller of the same downstream (a
    /// fleet's, whose deciding node changed): `reference` is where the
    /// downstream last ran out of room, and a cut `cut_age` ago still
    /// cools down here, judged against `window` as it is now, so the
    /// evidence the last cut answered does not cut twice.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::{Action, AimdConfig, HoldReason, WindowSummary};
    /// use tokio::time::Instant;
    /// let slow = WindowSummary { samples: 500, p99: Duration::from_millis(400), ..Default::default() };
    /// let mut aimd = AimdConfig::default().build()?;
    /// let now = Instant::now();
    /// aimd.resume(now, Some(90.0), Some(Duration::from_secs(2)), &slow);
    /// assert_eq!(aimd.reference_rate(), Some(90.0));
    /// let d = aimd.decide(now, 80.0, &slow, true);
    /// assert_eq!(d.action, Action::Hold { reason: HoldReason::Cooldown });
    /// # Ok::<(), dripfeed::rate::AimdError>(())
    /// ```
    pub fn resume(
        &mut self,
        now: Instant,
        reference: Option<f64>,
        cut_age: Option<Duration>,
        window: &WindowSummary,
    ) {
        self.reference = reference.filter(|r| r.is_finite() && *r > 0.0);
        self.last_cut = cut_age
            .filter(|age| *age < self.cfg.cooldown)
            .map(|age| Cut {
                at: now.checked_sub(age).unwrap_or(now),
                p99: window.p99,
                failure_share: window.failure_share,
                congestion: window.congestion,
            });
    }

    /// Whether [`decide`](Self::decide) would act at `now` (an interval has
    /// passed since the last decision). Lets a caller skip building a
    /// summary when it would be ignored.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::WindowSummary;
    /// use tokio::time::Instant;
    /// let mut aimd = dripfeed::rate::AimdConfig::default().build()?;
    /// let t0 = Instant::now();
    /// assert!(aimd.due(t0));
    /// aimd.decide(t0, 50.0, &WindowSummary::default(), false);
    /// assert!(!aimd.due(t0 + Duration::from_millis(999)));
    /// assert!(aimd.due(t0 + Duration::from_secs(1)));
    /// # Ok::<(), dripfeed::rate::AimdError>(())
    /// ```
    pub fn due(&self, now: Instant) -> bool {
        self.last_decision
            .is_none_or(|last| now.saturating_duration_since(last) >= self.cfg.interval)
    }

    /// Decides the rate from `now` on, given the current rate, the latency
    /// window and whether the drain was busy (jobs waiting or every
    /// in-flight slot taken) since the last decision.
    ///
    /// Acts at most once per interval: earlier calls return
    /// `Hold { reason: TooSoon }` and change nothing. A non-finite
    /// `current_rate` counts as the floor; the result is always within
    /// `[floor, ceiling]`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::{Action, AimdConfig, HoldReason};
    /// use dripfeed::rate::WindowSummary;
    /// use tokio::time::Instant;
    ///
    /// let mut aimd = AimdConfig::default().build()?;
    /// let t0 = Instant::now();
    /// let good = WindowSummary { samples: 500, p99: Duration::from_millis(40), ..Default::default() };
    /// assert_eq!(aimd.decide(t0, 100.0, &good, true).rate, 110.0);
    /// let early = aimd.decide(t0 + Duration::from_millis(10), 110.0, &good, true);
    /// assert_eq!(early.action, Action::Hold { reason: HoldReason::TooSoon });
    /// let idle = aimd.decide(t0 + Duration::from_secs(1), 110.0, &good, false);
    /// assert_eq!((idle.rate, idle.action), (110.0, Action::Hold { reason: HoldReason::Idle }));
    /// # Ok::<(), dripfeed::rate::AimdError>(())
    /// ```
    pub fn decide(
        &mut self,
        now: Instant,
        current_rate: f64,
        window: &WindowSummary,
        busy: bool,
    ) -> Decision {
        let rate = if current_rate.is_finite() {
            current_rate.clamp(self.cfg.floor, self.cfg.ceiling)
        } else {
            self.cfg.floor
        };
        let hold = |reason| Decision {
            rate,
            action: Action::Hold { reason },
            pause: None,
        };
        if !self.due(now) {
            return hold(HoldReason::TooSoon);
        }
        let since = self
            .last_decision
            .map_or(self.cfg.interval, |last| {
                now.saturating_duration_since(last)
            })
            .max(self.cfg.interval);
        self.last_decision = Some(now);
        let judged = window.samples >= self.cfg.min_samples;
        let prev_p99 = std::mem::replace(&mut self.prev_p99, judged.then_some(window.p99));
        let (rise, fall) = prev_p99.map_or((Duration::ZERO, Duration::ZERO), |prev| {
            (
                window.p99.saturating_sub(prev),
                prev.saturating_sub(window.p99),
            )
        });
        // How fast the downstream's queue grows: seconds of wait per second,
        // which is (rate - capacity) / capacity when the rate overruns it.
        let growth = rise.as_secs_f64() / since.as_secs_f64();
        // p99 one interval ahead, if it keeps rising as it did since the
        // previous decision.
        let ahead = Duration::try_from_secs_f64(self.cfg.interval.as_secs_f64() * growth)
            .unwrap_or(Duration::MAX);
        let projected = window.p99.saturating_add(ahead);
        let cooling = self
            .last_cut
            .filter(|cut| now.saturating_duration_since(cut.at) < self.cfg.cooldown);

        // The p99 above the target, and how many seconds of it the
        // downstream's queue sheds per second: by what it delivers over
        // what is sent, and by how fast the p99 fell since the last look.
        let excess = window.p99.saturating_sub(self.cfg.target_p99).as_secs_f64();
        let shedding = match window.throughput > 0.0 {
            true => (window.throughput - rate).max(0.0) / window.throughput,
            false => 0.0,
        };
        let falling = fall.as_secs_f64() / since.as_secs_f64();
        let soon = |pace: f64| pace * DRAIN_HORIZON >= excess;

        if let Some(signal) = self.signal(window, judged, projected) {
            // Delivering more than is sent: the queue behind the p99 is
            // draining already, and a cut would only go under capacity,
            // unless it drains too slowly to matter.
            if signal == Signal::Latency && window.throughput >= rate * DRAINING && soon(shedding) {
                return hold(HoldReason::LatencyFalling);
            }
            if let Some(cut) = cooling
                && !worse(signal, &cut, window)
            {
                return hold(HoldReason::Cooldown);
            }
            if signal == Signal::Latency
                && cooling.is_none()
                && fall > self.cfg.target_p99.mul_f64(RISE)
                && soon(falling)
            {
                return hold(HoldReason::LatencyFalling);
            }
            if rate <= self.cfg.floor {
                return hold(HoldReason::AtFloor);
            }
            return self.cut(now, rate, signal, window, growth, cooling.is_some());
        }

        if !busy {
            return hold(HoldReason::Idle);
        }
        if !judged {
            return hold(HoldReason::TooFewSamples);
        }
        if cooling.is_some() {
            return hold(HoldReason::Cooldown);
        }
        if rise > self.cfg.target_p99.mul_f64(RISE) {
            return hold(HoldReason::LatencyRising);
        }
        if rate >= self.cfg.ceiling {
            return hold(HoldReason::AtCeiling);
        }
        Decision {
            rate: self.step_up(rate),
            action: Action::Increase,
            pause: None,
        }
    }

    /// The strongest bad signal in the window, if any.
    fn signal(&self, w: &WindowSummary, judged: bool, projected: Duration) -> Option<Signal> {
        let attempts_enough = w.attempts() >= self.cfg.min_samples;
        if w.congestion > 0 {
            Some(Signal::Congestion)
        } else if attempts_enough && w.failure_share > self.cfg.failure_threshold {
            Some(Signal::Failures)
        } else if judged && projected > self.cfg.target_p99 {
            Some(Signal::Latency)
        } else {
            None
        }
    }

    fn cut(
        &mut self,
        now: Instant,
        rate: f64,
        signal: Signal,
        w: &WindowSummary,
        growth: f64,
        escalation: bool,
    ) -> Decision {
        // The capacity the queue's growth implies: rate / (1 + growth), or
        // what the downstream delivers if that is less (its queue bounded
        // by the deliveries in flight, the p99 stops growing: the growth
        // no longer tells how far over it the rate is).
        let delivering = w.throughput > 0.0 && w.throughput < rate * OVERRUN;
        let mut implied = rate / (1.0 + growth);
        let excess = w.p99.saturating_sub(self.cfg.target_p99).as_secs_f64();
        let mut next = match signal {
            Signal::Latency => {
                let f = self.cfg.gentle_decrease / (1.0 + growth) - excess / DRAIN_SECS;
                rate * f.clamp(self.cfg.decrease, self.cfg.gentle_decrease)
            }
            Signal::Failures | Signal::Congestion => rate * self.cfg.decrease,
        };
        if signal == Signal::Latency && delivering {
            implied = implied.min(w.throughput);
            let f = self.cfg.gentle_decrease - excess / DRAIN_SECS;
            next = next.min(w.throughput * f.clamp(self.cfg.decrease, self.cfg.gentle_decrease));
        }
        if !escalation {
            match signal {
                Signal::Latency => self.reference = Some(implied),
                Signal::Congestion => self.reference = Some(rate),
                Signal::Failures => {}
            }
        }
        self.last_cut = Some(Cut {
            at: now,
            p99: w.p99,
            failure_share: w.failure_share,
            congestion: w.congestion,
        });
        self.probes = 0;
        let pause = match signal {
            Signal::Congestion => w.retry_hint.map(|h| h.min(MAX_PAUSE)),
            _ => None,
        };
        Decision {
            rate: next.max(self.cfg.floor),
            action: Action::Decrease { reason: signal },
            pause,
        }
    }

    /// The rate after an additive step from `rate` (see the module docs).
    fn step_up(&mut self, rate: f64) -> f64 {
        let inc = self.cfg.increase;
        let next = match self.reference {
            None => rate + inc.min(rate * STARTUP_STEP),
            Some(reference) if rate < reference => {
                let step = ((reference - rate) * APPROACH).clamp(inc * MIN_STEP, inc);
                (rate + step).min(reference)
            }
            Some(reference) => {
                self.probes = self.probes.saturating_add(1);
                rate + (reference * PROBE_STEP * f64::from(self.probes)).min(inc)
            }
        };
        next.min(self.cfg.ceiling)
    }
}

/// Whether `signal` is clearly worse now than at `cut`.
fn worse(signal: Signal, cut: &Cut, w: &WindowSummary) -> bool {
    match signal {
        Signal::Latency => w.p99.as_secs_f64() > cut.p99.as_secs_f64() * ESCALATION,
        Signal::Failures => w.failure_share > cut.failure_share * ESCALATION,
        Signal::Congestion => w.congestion as f64 > cut.congestion as f64 * ESCALATION,
    }
}
