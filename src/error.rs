//! The configuration errors: [`BuildError`] (a builder refused its
//! settings) and [`RateError`] (a rate change refused at run time).

use std::fmt;

/// Why a [`ThrottleBuilder`](crate::ThrottleBuilder) refused its configuration.
///
/// ```
/// use dripfeed::{BuildError, Throttle};
/// let err = Throttle::<u32>::builder().drain_rate(f64::NAN).validate().unwrap_err();
/// assert!(matches!(err, BuildError::InvalidRate { .. }));
/// assert_eq!(err.to_string(), "drain rate must be finite and > 0, got NaN");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// No drain rate was set.
    MissingRate,
    /// A rate (`what` names it) is zero, negative, NaN or infinite.
    InvalidRate {
        /// Which rate.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// The drain rate is above `max_rate`.
    RateAboveMax {
        /// The drain rate.
        rate: f64,
        /// The maximum rate.
        max_rate: f64,
    },
    /// The drain rate is outside the adaptive controller's floor and ceiling.
    RateOutsideAdaptive {
        /// The drain rate.
        rate: f64,
        /// The controller's floor.
        floor: f64,
        /// The controller's ceiling.
        ceiling: f64,
    },
    /// A duration (`what` names it) is zero.
    ZeroDuration {
        /// Which duration.
        what: &'static str,
    },
    /// A capacity (`what` names it) is zero.
    ZeroCapacity {
        /// Which capacity.
        what: &'static str,
    },
    /// The ring would be too large to allocate.
    CapacityTooLarge {
        /// The capacity asked for, in jobs (saturated).
        capacity: u64,
        /// The largest capacity accepted.
        max: u64,
    },
    /// `max_in_flight` is zero or above `u32::MAX`.
    InvalidInFlight(usize),
    /// `Overflow::DeadLetter` needs a dead-letter sink.
    MissingSink,
    /// The retry policy is invalid (the message says why).
    InvalidRetry(&'static str),
    /// The per-key table could not be built.
    Keyed(crate::keyed::TableError),
    /// `build` was called outside a tokio runtime.
    NoRuntime,
    /// Two settings that each decide the same thing were both given (a
    /// fixed `capacity` and a `latency_budget` both size the queue): give
    /// one.
    Conflict {
        /// The one set first in the builder's terms.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// Two settings that cannot work together.
    Incompatible {
        /// One, in the builder's terms.
        first: &'static str,
        /// The other.
        second: &'static str,
        /// Why not.
        why: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::MissingRate => write!(f, "no drain rate set"),
            BuildError::InvalidRate { what, value } => {
                write!(f, "{what} must be finite and > 0, got {value}")
            }
            BuildError::RateAboveMax { rate, max_rate } => {
                write!(f, "drain rate {rate} is above max rate {max_rate}")
            }
            BuildError::RateOutsideAdaptive {
                rate,
                floor,
                ceiling,
            } => write!(
                f,
                "drain rate {rate} is outside the adaptive range [{floor}, {ceiling}]"
            ),
            BuildError::ZeroDuration { what } => write!(f, "{what} must be > 0"),
            BuildError::ZeroCapacity { what } => write!(f, "{what} must be at least 1"),
            BuildError::CapacityTooLarge { capacity, max } => {
                write!(
                    f,
                    "capacity {capacity} is too large to allocate (max {max})"
                )
            }
            BuildError::InvalidInFlight(n) => {
                write!(f, "max in flight must be in 1..=4294967295, got {n}")
            }
            BuildError::MissingSink => write!(f, "dead-letter overflow needs a dead-letter sink"),
            BuildError::Incompatible { first, second, why } => {
                write!(f, "{first} cannot go with {second}: {why}")
            }
            BuildError::Conflict { first, second } => {
                write!(
                    f,
                    "{first} and {second} both given: they size the same thing, give one"
                )
            }
            BuildError::InvalidRetry(why) => write!(f, "retry policy: {why}"),
            BuildError::Keyed(e) => write!(f, "per-key table: {e}"),
            BuildError::NoRuntime => write!(f, "build must be called inside a tokio runtime"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Why [`Throttle::set_drain_rate`](crate::Throttle::set_drain_rate) refused a rate.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, RateError, Throttle};
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .build(|_job: &u32, _attempt| async { Delivery::Done })
///     .unwrap();
/// assert_eq!(throttle.set_drain_rate(20.0), Err(RateError::AboveMax { rate: 20.0, max_rate: 10.0 }));
/// assert_eq!(throttle.set_drain_rate(-1.0), Err(RateError::Invalid(-1.0)));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RateError {
    /// Zero, negative, NaN or infinite.
    Invalid(f64),
    /// Above the builder's `max_rate`, which sized the ring.
    AboveMax {
        /// The rate asked for.
        rate: f64,
        /// The builder's `max_rate`.
        max_rate: f64,
    },
    /// The throttle is shut down.
    Closed,
}

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateError::Invalid(r) => write!(f, "drain rate must be finite and > 0, got {r}"),
            RateError::AboveMax { rate, max_rate } => {
                write!(f, "drain rate {rate} is above max rate {max_rate}")
            }
            RateError::Closed => write!(f, "throttle is closed"),
        }
    }
}

impl std::error::Error for RateError {}
