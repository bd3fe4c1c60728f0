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

/// A wait rendered in whole seconds that still spreads the callers told it
/// together: `wait` rounded up (at least 1, so never earlier than the wait),
/// plus `u`'s share (`u` in [0, 1)) of a spread of whole seconds: 1 s up to
/// a 5 s wait, then 20 % of it. Callers told "1.0 to 1.2 s" come back at 1
/// or at 2 s, half each, instead of all at 2.
pub(crate) fn spread_seconds(wait: Duration, u: f64) -> u64 {
    let base = whole_seconds(wait);
    let spread = ((base as f64 * JITTER).round() as u64).max(1);
    let extra = (u.clamp(0.0, 1.0) * (spread + 1) as f64) as u64;
    base.saturating_add(extra.min(spread))
}

/// A number unique to this process, from the operating system's randomness
/// (std's `RandomState` keys): mixed into every refusal's jitter, so that
/// processes started alike do not jitter in lockstep.
pub(crate) fn process_key() -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0x5EED_u64))
}

/// A number in [0, 1) spread evenly from `seed` (splitmix64's finaliser):
/// consecutive seeds give unrelated values.
pub(crate) fn unit(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Nanoseconds in `d`, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn whole_seconds_spread_over_two_values_at_least() {
        use super::spread_seconds;
        let s = |ms: u64, u: f64| spread_seconds(Duration::from_millis(ms), u);
        assert_eq!(
            (s(1000, 0.0), s(1000, 0.49), s(1000, 0.5), s(1000, 0.999)),
            (1, 1, 2, 2)
        );
        assert_eq!(
            (s(1100, 0.0), s(1100, 0.99)),
            (2, 3),
            "never below the wait"
        );
        assert_eq!(
            (s(10_000, 0.0), s(10_000, 0.5), s(10_000, 0.99)),
            (10, 11, 12)
        );
        assert_eq!(s(0, 0.0), 1);
        assert_eq!(spread_seconds(Duration::MAX, 0.99), u64::MAX, "saturates");
    }

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
