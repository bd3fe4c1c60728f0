//! Small number helpers: durations from seconds that saturate instead of
//! panicking, and the 20 % jitter on wait hints.

use std::time::Duration;

/// The most jitter added to a wait hint, as a share of it.
const JITTER: f64 = 0.2;

/// `secs` as a duration, saturating on NaN, negative or huge values.
pub(crate) fn secs(secs: f64) -> Duration {
    if secs.is_finite() && (0.0..1e12).contains(&secs) {
        return Duration::from_secs_f64(secs);
    }
    Duration::try_from_secs_f64(secs).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

/// `d × factor`, saturating at `Duration::MAX` (`Duration::mul_f64` panics
/// on overflow, and a tiny rate makes a huge wait).
pub(crate) fn scale(d: Duration, factor: f64) -> Duration {
    secs(d.as_secs_f64() * factor)
}

/// `wait` plus its share `u` (in [0, 1)) of the jitter.
pub(crate) fn with_jitter(wait: Duration, u: f64) -> Duration {
    scale(wait, 1.0 + JITTER * u.clamp(0.0, 1.0))
}

/// A wait hint with up to 20 % jitter added, so refused callers do not all
/// come back at the same instant.
pub(crate) fn jittered(wait: Duration) -> Duration {
    with_jitter(wait, fastrand::f64())
}

/// Whole seconds for a header: rounded up, at least 1, saturating.
pub(crate) fn whole_seconds(d: Duration) -> u64 {
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    secs.max(1)
}

/// Nanoseconds in `d`, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_band() {
        let base = Duration::from_secs(10);
        for _ in 0..1000 {
            let j = jittered(base);
            assert!(j >= base && j <= base.mul_f64(1.2));
        }
        assert_eq!(with_jitter(base, 1.0), Duration::from_secs(12));
    }

    #[test]
    fn secs_saturates() {
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(-3.0), Duration::ZERO);
        assert_eq!(secs(f64::INFINITY), Duration::MAX);
        assert_eq!(secs(1.5), Duration::from_millis(1500));
        assert_eq!(nanos(Duration::MAX), u64::MAX);
    }
}
