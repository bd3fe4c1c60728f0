//! A destination's overrides of its set's template, and the set's errors.

use std::fmt;
use std::time::Duration;

use crate::BuildError;

/// What one destination changes from its set's template: its drain rate,
/// its ceiling (the highest rate it may reach, adaptive or set by hand; its
/// ring is sized for it), its latency budget and the deliveries it may run
/// at once.
///
/// ```
/// use dripfeed::destinations::DestinationConfig;
/// use std::time::Duration;
/// let slow = DestinationConfig::default()
///     .rate(5.0)
///     .ceiling(20.0)
///     .budget(Duration::from_secs(10));
/// assert_eq!(slow.rate_override(), Some(5.0));
/// assert!(slow.has_own_series());
/// assert!(!slow.own_series(false).has_own_series());
/// assert!(DestinationConfig::default().rate(-1.0).validate(100.0).is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DestinationConfig {
    rate: Option<f64>,
    ceiling: Option<f64>,
    budget: Option<Duration>,
    in_flight: Option<usize>,
    /// `Some(false)`: summed into `_other` although named.
    series: Option<bool>,
}

impl DestinationConfig {
    /// The drain rate, jobs per second (for an adaptive set: where it starts).
    pub fn rate(mut self, jobs_per_second: f64) -> Self {
        self.rate = Some(jobs_per_second);
        self
    }

    /// The highest rate (the AIMD ceiling when adaptive); at most the set's.
    pub fn ceiling(mut self, jobs_per_second: f64) -> Self {
        self.ceiling = Some(jobs_per_second);
        self
    }

    /// The latency budget: the destination's bound is `budget × rate`.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The most deliveries it may run at once, in place of the template's
    /// `max_in_flight` (still within the set's
    /// [`max_in_flight`](super::DestinationsBuilder::max_in_flight)):
    /// a destination that is alone in its set for good may take the whole
    /// budget while the others keep a small cap. A change applies from the
    /// destination's next spell of work.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1000.0).max_in_flight(2))
    ///     .max_in_flight(64)
    ///     .destination("main", DestinationConfig::default().max_in_flight(64))
    ///     .build(|_name: &str| |_: &u32, _| std::future::pending::<Delivery>())?;
    /// for job in 0..10 {
    ///     set.try_submit("main", job)?;
    ///     set.try_submit("other", job)?;
    /// }
    /// tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    /// assert_eq!(set.stats("main").map(|s| s.in_flight()), Some(10));
    /// assert_eq!(set.stats("other").map(|s| s.in_flight()), Some(2), "the template's cap");
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_in_flight(mut self, deliveries: usize) -> Self {
        self.in_flight = Some(deliveries);
        self
    }

    /// Whether a named destination has its own metric series (label
    /// `destination` = its name; the default) or is summed into
    /// [`OTHER`](super::OTHER) with the unnamed ones: with many
    /// destinations, give the few you watch their own and leave the rest
    /// summed, so a scrape stays small. A change applies to the series at
    /// once and to a throttle from its next spell of work.
    ///
    /// ```
    /// use dripfeed::destinations::DestinationConfig;
    /// let quiet = DestinationConfig::default().own_series(false);
    /// assert!(!quiet.has_own_series());
    /// ```
    pub fn own_series(mut self, own: bool) -> Self {
        self.series = Some(own);
        self
    }

    /// Whether it has its own metric series when named (see
    /// [`own_series`](Self::own_series)).
    pub fn has_own_series(&self) -> bool {
        self.series.unwrap_or(true)
    }

    /// The rate set, if any.
    pub fn rate_override(&self) -> Option<f64> {
        self.rate
    }

    /// The ceiling set, if any.
    pub fn ceiling_override(&self) -> Option<f64> {
        self.ceiling
    }

    /// The budget set, if any.
    pub fn budget_override(&self) -> Option<Duration> {
        self.budget
    }

    /// The deliveries at once set, if any
    /// ([`max_in_flight`](Self::max_in_flight)).
    ///
    /// ```
    /// use dripfeed::destinations::DestinationConfig;
    /// assert_eq!(DestinationConfig::default().max_in_flight(32).in_flight_override(), Some(32));
    /// assert_eq!(DestinationConfig::default().in_flight_override(), None);
    /// ```
    pub fn in_flight_override(&self) -> Option<usize> {
        self.in_flight
    }

    /// Checks it against the set's highest rate `max`.
    pub fn validate(&self, max: f64) -> Result<(), DestinationError> {
        for (what, value) in [("rate", self.rate), ("ceiling", self.ceiling)] {
            match value {
                Some(v) if !(v.is_finite() && v > 0.0) => {
                    return Err(DestinationError::InvalidRate { what, value: v });
                }
                Some(v) if v > max => {
                    return Err(DestinationError::AboveMax { what, rate: v, max });
                }
                _ => {}
            }
        }
        if let (Some(rate), Some(ceiling)) = (self.rate, self.ceiling)
            && rate > ceiling
        {
            return Err(DestinationError::AboveMax {
                what: "rate",
                rate,
                max: ceiling,
            });
        }
        if self.budget.is_some_and(|b| b.is_zero()) {
            return Err(DestinationError::ZeroBudget);
        }
        match self.in_flight {
            Some(0) => {
                return Err(DestinationError::ZeroLimit {
                    what: "max_in_flight",
                });
            }
            Some(n) if u32::try_from(n).is_err() => {
                return Err(DestinationError::Build(BuildError::InvalidInFlight(n)));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Why a set or a destination's settings were refused.
///
/// ```
/// use dripfeed::destinations::{DestinationConfig, DestinationError, Destinations};
/// use dripfeed::{Delivery, Throttle};
/// let built = Destinations::builder(Throttle::builder().drain_rate(100.0))
///     .destination("a", DestinationConfig::default().rate(-1.0))
///     .build(|_name: &str| |_: &u32, _| async { Delivery::Done });
/// match built {
///     Err(DestinationError::InvalidRate { what, value }) => assert_eq!((what, value), ("rate", -1.0)),
///     _ => panic!("a negative rate is refused"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DestinationError {
    /// The template, or a destination's throttle built from it, is invalid.
    Build(BuildError),
    /// A rate that is not a positive finite number.
    InvalidRate {
        /// `rate` or `ceiling`.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A rate above the most the set (or the destination's ceiling) allows.
    AboveMax {
        /// `rate` or `ceiling`.
        what: &'static str,
        /// The rate asked for.
        rate: f64,
        /// The most allowed.
        max: f64,
    },
    /// The destination is active and its ring was sized for less: a full
    /// latency budget at this ceiling does not fit. Nothing changed;
    /// configure it once the destination is idle (its next ring is sized
    /// for it), or ask for at most `ring_rate`.
    BeyondRing {
        /// The ceiling asked for (the set's most when none is given).
        rate: f64,
        /// The highest ceiling its ring holds a full budget for.
        ring_rate: f64,
    },
    /// A zero latency budget.
    ZeroBudget,
    /// The breaker's settings (the message says which).
    Breaker(&'static str),
    /// A zero limit (`what`: `max_jobs`, `max_destinations`, `max_in_flight`).
    ZeroLimit {
        /// Which limit.
        what: &'static str,
    },
    /// The set holds its most destinations and none can be retired.
    Full {
        /// The set's `max_destinations`.
        max: usize,
    },
    /// The template has a setting a set cannot give each destination's
    /// throttle; `instead` says what to use.
    Template {
        /// The setting: `journal` or `per_key`.
        what: &'static str,
        /// What to use instead.
        instead: &'static str,
    },
    /// The set was shut down.
    Closed,
    /// [`Destinations::define`](super::Destinations::define) found an
    /// unnamed destination of that name still holding jobs (a submission's,
    /// or the journal's from a name no longer configured): name it once
    /// they have drained.
    Unnamed,
    /// [`Destinations::define_all`](super::Destinations::define_all) was
    /// given the same name twice.
    Duplicate,
}

impl fmt::Display for DestinationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestinationError::Build(e) => write!(f, "destination throttle: {e}"),
            DestinationError::InvalidRate { what, value } => {
                write!(
                    f,
                    "destination {what} must be a positive finite number, not {value}"
                )
            }
            DestinationError::AboveMax { what, rate, max } => {
                write!(
                    f,
                    "destination {what} {rate}/s is above the most allowed, {max}/s"
                )
            }
            DestinationError::BeyondRing { rate, ring_rate } => write!(
                f,
                "a ceiling of {rate}/s is beyond what the active destination's ring holds a full budget for \
                 ({ring_rate}/s): give a ceiling (and rate) of at most {ring_rate}/s, or change it once the \
                 destination is idle"
            ),
            DestinationError::ZeroBudget => f.write_str("destination latency budget must be > 0"),
            DestinationError::Breaker(why) => f.write_str(why),
            DestinationError::ZeroLimit { what } => write!(f, "{what} must be at least 1"),
            DestinationError::Full { max } => {
                write!(f, "the set holds its {max} destinations and none is idle")
            }
            DestinationError::Template { what, instead } => {
                write!(f, "a set's template cannot have {what}: {instead}")
            }
            DestinationError::Closed => f.write_str("the destination set was shut down"),
            DestinationError::Unnamed => f.write_str(
                "an unnamed destination of that name still holds jobs; name it once they have drained",
            ),
            DestinationError::Duplicate => f.write_str("the destination is named twice in one change"),
        }
    }
}

impl std::error::Error for DestinationError {}

/// Why [`Destinations::define_all`](super::Destinations::define_all)
/// changed nothing: the destination refused, and why.
///
/// ```
/// use dripfeed::destinations::{DefineError, DestinationError};
/// let e = DefineError { destination: "crm".into(), error: DestinationError::Full { max: 2 } };
/// assert_eq!(e.to_string(), "crm: the set holds its 2 destinations and none is idle");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DefineError {
    /// The destination refused.
    pub destination: String,
    /// Why.
    pub error: DestinationError,
}

impl fmt::Display for DefineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.destination, self.error)
    }
}

impl std::error::Error for DefineError {}

impl From<BuildError> for DestinationError {
    fn from(e: BuildError) -> Self {
        DestinationError::Build(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_checked_against_the_set_and_each_other() {
        let ok = DestinationConfig::default().rate(5.0).ceiling(10.0);
        assert_eq!(ok.validate(100.0), Ok(()));
        let high = DestinationConfig::default().ceiling(200.0);
        assert!(matches!(
            high.validate(100.0),
            Err(DestinationError::AboveMax {
                what: "ceiling",
                ..
            })
        ));
        let crossed = DestinationConfig::default().rate(20.0).ceiling(10.0);
        assert!(matches!(
            crossed.validate(100.0),
            Err(DestinationError::AboveMax { what: "rate", max, .. }) if max == 10.0
        ));
        let nan = DestinationConfig::default().rate(f64::NAN);
        assert!(matches!(
            nan.validate(100.0),
            Err(DestinationError::InvalidRate { .. })
        ));
        let zero = DestinationConfig::default().budget(Duration::ZERO);
        assert_eq!(zero.validate(100.0), Err(DestinationError::ZeroBudget));
        let none = DestinationConfig::default().max_in_flight(0);
        assert!(matches!(
            none.validate(100.0),
            Err(DestinationError::ZeroLimit { .. })
        ));
        let huge = DestinationConfig::default().max_in_flight(usize::MAX);
        assert!(matches!(
            huge.validate(100.0),
            Err(DestinationError::Build(BuildError::InvalidInFlight(_)))
        ));
        assert!(
            DestinationConfig::default()
                .max_in_flight(64)
                .validate(100.0)
                .is_ok()
        );
    }
}
