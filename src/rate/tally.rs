//! [`Tally`]: delivery outcomes counted so that tallies add up. Nodes of a
//! fleet each count a second's deliveries in one; added together (in Redis,
//! say) they give the fleet's p99 over every sample, never an average of
//! each node's p99.
//!
//! Latencies go into logarithmic buckets 1/16 of a power of two wide (at
//! most 6.25 % apart); a quantile is reported at the top of its bucket, so
//! never below the value it stands for.

use std::collections::BTreeMap;
use std::time::Duration;

use super::summary::WindowSummary;

/// Sub-buckets per power of two (4 bits of mantissa).
const SUB: u64 = 16;
/// Latencies above this many microseconds (60 s) count as 60 s.
const HIGHEST_MICROS: u64 = 60_000_000;

/// The bucket of a latency of `us` microseconds: exact below 16 µs, then
/// 16 per power of two.
fn bucket(us: u64) -> u16 {
    let us = us.clamp(1, HIGHEST_MICROS);
    if us < SUB {
        return us as u16;
    }
    let e = 63 - u64::from(us.leading_zeros()); // >= 4
    let m = (us >> (e - 4)) - SUB; // 0..16
    (SUB + (e - 4) * SUB + m) as u16
}

/// The largest latency in bucket `b`, microseconds.
fn top(b: u16) -> u64 {
    let b = u64::from(b);
    if b < SUB {
        return b;
    }
    let e = (b - SUB) / SUB + 4;
    let m = (b - SUB) % SUB;
    ((SUB + m + 1) << (e - 4)) - 1
}

/// Delivery outcomes counted so that two tallies add up to the tally of
/// both: successful deliveries' latencies in logarithmic buckets (6.25 %
/// wide), failures, timeouts, "slow down" answers with the largest
/// `Retry-After` hint, and how often the drain found nothing to do (`idle`)
/// or something (`worked`).
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::Tally;
/// let (mut a, mut b) = (Tally::default(), Tally::default());
/// for ms in 1..=50 {
///     a.record(Duration::from_millis(ms));
///     b.record(Duration::from_millis(ms + 50));
/// }
/// a.merge(&b);
/// let s = a.summary();
/// assert_eq!(s.samples, 100);
/// // The fleet's p99 over all 100 samples, within a bucket's 6.25 %.
/// assert!(s.p99 >= Duration::from_millis(99) && s.p99 <= Duration::from_millis(106));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    buckets: BTreeMap<u16, u64>,
    /// Failed deliveries.
    pub failures: u64,
    /// Deliveries that timed out.
    pub timeouts: u64,
    /// "Slow down" answers (429 or 503 with a `Retry-After`).
    pub congestion: u64,
    /// The largest `Retry-After` hint seen, milliseconds (0: none).
    pub hint_ms: u64,
    /// Times the drain looked for work and found none.
    pub idle: u64,
    /// Deliveries started.
    pub worked: u64,
}

impl Tally {
    /// A successful delivery that took `latency` (saturating at 60 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut t = dripfeed::rate::Tally::default();
    /// t.record(Duration::from_secs(3600));
    /// assert_eq!(t.summary().max, Duration::from_secs(60));
    /// ```
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let n = self.buckets.entry(bucket(us)).or_default();
        *n = n.saturating_add(1);
    }

    /// A "slow down" answer, with its `Retry-After` hint if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut t = dripfeed::rate::Tally::default();
    /// t.record_congestion(Some(Duration::from_secs(2)));
    /// t.record_congestion(None);
    /// let s = t.summary();
    /// assert_eq!((s.congestion, s.retry_hint), (2, Some(Duration::from_secs(2))));
    /// ```
    pub fn record_congestion(&mut self, hint: Option<Duration>) {
        self.congestion = self.congestion.saturating_add(1);
        let ms = hint.map_or(0, |h| u64::try_from(h.as_millis()).unwrap_or(u64::MAX));
        self.hint_ms = self.hint_ms.max(ms);
    }

    /// Successful deliveries counted (saturating).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut t = dripfeed::rate::Tally::default();
    /// t.record(Duration::from_millis(3));
    /// t.record(Duration::from_secs(3));
    /// assert_eq!(t.samples(), 2);
    /// ```
    pub fn samples(&self) -> u64 {
        self.buckets
            .values()
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    }

    /// Whether nothing at all was counted.
    ///
    /// ```
    /// let mut t = dripfeed::rate::Tally::default();
    /// assert!(t.is_empty());
    /// t.idle += 1;
    /// assert!(!t.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        *self == Tally::default()
    }

    /// Adds `other` in.
    ///
    /// ```
    /// use dripfeed::rate::Tally;
    /// let (mut a, mut b) = (Tally::default(), Tally::default());
    /// (a.failures, a.hint_ms) = (1, 500);
    /// (b.failures, b.hint_ms) = (2, 200);
    /// a.merge(&b);
    /// assert_eq!((a.failures, a.hint_ms), (3, 500));
    /// ```
    pub fn merge(&mut self, other: &Tally) {
        for (b, n) in &other.buckets {
            let c = self.buckets.entry(*b).or_default();
            *c = c.saturating_add(*n);
        }
        self.failures = self.failures.saturating_add(other.failures);
        self.timeouts = self.timeouts.saturating_add(other.timeouts);
        self.congestion = self.congestion.saturating_add(other.congestion);
        self.hint_ms = self.hint_ms.max(other.hint_ms);
        self.idle = self.idle.saturating_add(other.idle);
        self.worked = self.worked.saturating_add(other.worked);
    }

    /// What the tally saw, as the AIMD controller reads a window.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut t = dripfeed::rate::Tally::default();
    /// t.failures = 1;
    /// t.record(Duration::from_millis(40));
    /// let s = t.summary();
    /// assert_eq!((s.samples, s.failure_share), (1, 0.5));
    /// assert!(s.p50 >= Duration::from_millis(40));
    /// ```
    pub fn summary(&self) -> WindowSummary {
        let samples = self.samples();
        let mut out = WindowSummary {
            samples,
            failures: self.failures,
            timeouts: self.timeouts,
            congestion: self.congestion,
            retry_hint: (self.hint_ms > 0).then(|| Duration::from_millis(self.hint_ms)),
            ..WindowSummary::default()
        };
        if samples > 0 {
            out.p50 = self.quantile(samples, 0.50);
            out.p99 = self.quantile(samples, 0.99);
            let last = self.buckets.keys().next_back().copied().unwrap_or(0);
            out.max = Duration::from_micros(top(last).min(HIGHEST_MICROS));
        }
        let attempts = out.attempts();
        if attempts > 0 {
            out.failure_share = out.failures.saturating_add(out.timeouts) as f64 / attempts as f64;
        }
        out
    }

    /// The latency at quantile `q` of `samples` recorded ones.
    fn quantile(&self, samples: u64, q: f64) -> Duration {
        let rank = ((q * samples as f64).ceil() as u64).clamp(1, samples);
        let mut seen = 0u64;
        for (b, n) in &self.buckets {
            seen = seen.saturating_add(*n);
            if seen >= rank {
                return Duration::from_micros(top(*b).min(HIGHEST_MICROS));
            }
        }
        Duration::ZERO
    }

    /// The tally as field and count pairs (`b<bucket>`, `f`, `t`, `c`, `h`,
    /// `i`, `w`; zeros left out): what a store adds up field by field, `h`
    /// (the hint) taking the largest rather than the sum.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut t = dripfeed::rate::Tally::default();
    /// t.idle = 2;
    /// t.record(Duration::from_micros(5));
    /// assert_eq!(t.fields(), vec![("b5".to_owned(), 1), ("i".to_owned(), 2)]);
    /// let back = dripfeed::rate::Tally::from_fields(t.fields().iter().map(|(f, n)| (f.as_str(), *n)));
    /// assert_eq!(back, t);
    /// ```
    pub fn fields(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .buckets
            .iter()
            .map(|(b, n)| (format!("b{b}"), *n))
            .collect();
        for (name, n) in [
            ("f", self.failures),
            ("t", self.timeouts),
            ("c", self.congestion),
            ("h", self.hint_ms),
            ("i", self.idle),
            ("w", self.worked),
        ] {
            if n > 0 {
                out.push((name.to_owned(), n));
            }
        }
        out
    }

    /// A tally read back from [`fields`](Self::fields)' pairs (unknown
    /// fields are skipped; repeated ones add up).
    ///
    /// ```
    /// let t = dripfeed::rate::Tally::from_fields([("f", 2), ("x", 9), ("f", 1)]);
    /// assert_eq!(t.failures, 3);
    /// ```
    pub fn from_fields<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Tally {
        let mut t = Tally::default();
        for (field, n) in pairs {
            let slot = match field {
                "f" => &mut t.failures,
                "t" => &mut t.timeouts,
                "c" => &mut t.congestion,
                "i" => &mut t.idle,
                "w" => &mut t.worked,
                "h" => {
                    t.hint_ms = t.hint_ms.max(n);
                    continue;
                }
                // Buckets past 60 s cannot be made here: damage, skipped.
                other => match other.strip_prefix('b').and_then(|b| b.parse::<u16>().ok()) {
                    Some(b) if b <= bucket(HIGHEST_MICROS) => t.buckets.entry(b).or_default(),
                    _ => continue,
                },
            };
            *slot = slot.saturating_add(n);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_latency_is_in_a_bucket_whose_top_is_within_six_percent_above_it() {
        let mut prev = 0;
        for us in (1..5_000u64).chain((5_000..HIGHEST_MICROS).step_by(9_973)) {
            let b = bucket(us);
            assert!(b >= prev, "buckets rise with the latency");
            prev = b;
            let t = top(b);
            assert!(t >= us, "{us} µs in bucket {b} topped at {t}");
            assert!(
                (t - us) as f64 <= us as f64 / 16.0,
                "{us} µs: top {t} too far"
            );
        }
        assert_eq!(bucket(u64::MAX), bucket(HIGHEST_MICROS));
    }

    #[test]
    fn merged_tallies_give_the_quantiles_of_all_their_samples() {
        let (mut fast, mut slow) = (Tally::default(), Tally::default());
        for _ in 0..980 {
            fast.record(Duration::from_millis(10));
        }
        for _ in 0..20 {
            slow.record(Duration::from_millis(900));
        }
        // Each alone: p99 10 ms and 900 ms; the average would be 455 ms.
        fast.merge(&slow);
        let s = fast.summary();
        assert_eq!(s.samples, 1000);
        let p99 = s.p99.as_millis();
        assert!((900..=957).contains(&p99), "p99 {p99} ms");
        assert!(s.p50.as_millis() >= 10 && s.p50.as_millis() < 11);
    }

    #[test]
    fn fields_round_trip_and_add_up() {
        let mut a = Tally {
            failures: 1,
            timeouts: 2,
            congestion: 3,
            hint_ms: 700,
            idle: 4,
            worked: 5,
            ..Tally::default()
        };
        a.record(Duration::from_millis(3));
        a.record(Duration::from_secs(2));
        let pairs = a.fields();
        let twice = Tally::from_fields(
            pairs
                .iter()
                .chain(pairs.iter())
                .map(|(f, n)| (f.as_str(), *n)),
        );
        let mut sum = a.clone();
        sum.merge(&a);
        assert_eq!(twice, sum);
        assert_eq!(twice.summary().samples, 4);
    }

    #[test]
    fn damaged_fields_are_skipped_not_trusted() {
        let t = Tally::from_fields([("b65535", 5), ("b2000", 1), ("b3", u64::MAX), ("b4", 9)]);
        let s = t.summary();
        assert_eq!(s.samples, u64::MAX, "saturated, not wrapped");
        assert_eq!(s.max, Duration::from_micros(4));
    }
}
