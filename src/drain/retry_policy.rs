//! [`RetryPolicy`]: how many times a failed delivery is tried again, and
//! after how long (exponential backoff with full jitter, or the downstream's
//! own `Retry-After`).

use std::time::Duration;

/// How failed deliveries are retried.
///
/// ```
/// use dripfeed::RetryPolicy;
/// use std::time::Duration;
/// let policy = RetryPolicy::new(5)
///     .backoff(Duration::from_millis(100), Duration::from_secs(30))
///     .capacity(10_000);
/// assert_eq!(policy.max_attempts(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base: Duration,
    cap: Duration,
    capacity: Option<usize>,
}

impl RetryPolicy {
    /// Up to `max_attempts` deliveries per job (1 = no retry), with
    /// exponential backoff and full jitter from 100 ms, capped at 30 s.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(3))
    ///     .build(|_: &u32, _| async { Delivery::Retry { after: None } })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(5)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.emitted(), stats.retried(), stats.outcome(Outcome::Failed)), (3, 2, 1));
    /// # }
    /// ```
    pub fn new(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(30),
            capacity: None,
        }
    }

    /// The backoff: the `k`-th retry (attempt `k + 1`) waits a random time
    /// in `[0, min(cap, base × 2^(k-1))]` (the first at most `base`, the
    /// second `2 × base`, …), or the downstream's `Retry-After` hint
    /// (capped at `cap`) when it gave one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Attempt, Delivery, RetryPolicy, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use tokio::time::{Duration, Instant};
    /// let (start, times) = (Instant::now(), Arc::new(Mutex::new(Vec::new())));
    /// let seen = times.clone();
    /// let policy = RetryPolicy::new(2).backoff(Duration::from_millis(10), Duration::from_millis(50));
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(policy)
    ///     .build(move |_: &u32, attempt: Attempt| {
    ///         seen.lock().unwrap().push(start.elapsed());
    ///         let after = Some(Duration::from_secs(10)); // "Retry-After: 10"
    ///         async move { if attempt.is_retry() { Delivery::Done } else { Delivery::Retry { after } } }
    ///     })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(*times.lock().unwrap(), [Duration::ZERO, Duration::from_millis(50)], "the hint, capped");
    /// # }
    /// ```
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.base = base;
        self.cap = cap;
        self
    }

    /// How many jobs may wait for a retry at once (default: the ring's
    /// size). Beyond it a failed job is dead-lettered at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(5).capacity(1))
    ///     .build(|_: &u32, _| async { Delivery::Retry { after: Some(Duration::from_secs(1)) } })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// throttle.try_submit(2).unwrap();
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// let stats = throttle.stats();
    /// assert_eq!(stats.retry_wait(), 1, "the first waits for its retry");
    /// assert_eq!(stats.outcome(Outcome::Failed), 1, "the second found no room");
    /// # }
    /// ```
    pub fn capacity(mut self, jobs: usize) -> Self {
        self.capacity = Some(jobs);
        self
    }

    /// The most deliveries per job.
    ///
    /// ```
    /// use dripfeed::RetryPolicy;
    /// assert_eq!(RetryPolicy::new(3).max_attempts(), 3);
    /// assert_eq!(RetryPolicy::new(1).max_attempts(), 1, "one delivery, no retry");
    /// ```
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    pub(crate) fn capacity_or(&self, default: usize) -> usize {
        self.capacity.unwrap_or(default)
    }

    pub(crate) fn is_valid(&self) -> Result<(), &'static str> {
        if self.max_attempts == 0 {
            Err("max attempts must be at least 1")
        } else if self.base.is_zero() || self.cap < self.base {
            Err("backoff needs 0 < base <= cap")
        } else if self.capacity == Some(0) {
            Err("retry capacity must be at least 1")
        } else {
            Ok(())
        }
    }

    /// The longest wait between attempts.
    #[cfg(feature = "journal")]
    pub(crate) fn cap(&self) -> Duration {
        self.cap
    }

    /// The wait before attempt `next` (2 for the first retry), given the
    /// downstream's hint and a uniform random number `u` in [0, 1).
    pub(crate) fn delay(&self, next: u32, hint: Option<Duration>, u: f64) -> Duration {
        if let Some(hint) = hint {
            return hint.min(self.cap);
        }
        let exp = next.saturating_sub(2).min(40);
        let ceiling = self.base.saturating_mul(1u32 << exp.min(31)).min(self.cap);
        ceiling.mul_f64(u.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_exponential_with_full_jitter_and_honours_hints() {
        let p = RetryPolicy::new(10).backoff(Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(
            p.delay(2, None, 0.999_999),
            Duration::from_millis(100).mul_f64(0.999_999)
        );
        assert_eq!(p.delay(3, None, 0.5), Duration::from_millis(100));
        assert_eq!(p.delay(4, None, 1.0), Duration::from_millis(400));
        assert_eq!(
            p.delay(60, None, 1.0),
            Duration::from_secs(2),
            "capped, no overflow"
        );
        assert_eq!(p.delay(2, None, 0.0), Duration::ZERO);
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(1)), 0.3),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(60)), 0.3),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn invalid_policies_are_named() {
        assert!(RetryPolicy::new(0).is_valid().is_err());
        assert!(
            RetryPolicy::new(2)
                .backoff(Duration::ZERO, Duration::from_secs(1))
                .is_valid()
                .is_err()
        );
        assert!(
            RetryPolicy::new(2)
                .backoff(Duration::from_secs(2), Duration::from_secs(1))
                .is_valid()
                .is_err()
        );
        assert!(RetryPolicy::new(2).capacity(0).is_valid().is_err());
        assert!(RetryPolicy::new(2).is_valid().is_ok());
    }
}
