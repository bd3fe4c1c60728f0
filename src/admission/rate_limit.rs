//! [`RateLimit`]: a limit's state as the IETF `RateLimit` /
//! `RateLimit-Policy` header fields describe it (rendered by
//! [`headers`](crate::headers), where it is reached).

use std::time::Duration;

use crate::util::num::{secs, whole_seconds};

/// A limit's state, as the `RateLimit` fields describe it.
///
/// For the shared queue: the quota is the admission bound, the window the
/// time the drain takes to empty a full queue, `remaining` the free places
/// and `reset` the time until one more place frees. For a key: the quota is
/// the bucket's size, the window the time it takes to drain a full bucket.
///
/// ```
/// use dripfeed::headers::RateLimit;
/// use std::time::Duration;
/// let limit = RateLimit::new("queue", 400, Duration::from_secs(2), 0, Duration::from_millis(1500));
/// assert_eq!(limit.policy_header(), r#""queue";q=400;w=2"#);
/// assert_eq!(limit.header(), r#""queue";r=0;t=2"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    policy: &'static str,
    quota: u64,
    /// The window and the reset time are only ever rendered in whole
    /// seconds (rounded up, at least 1), so they are kept that way: a
    /// refusal carrying a limit stays small.
    window_s: u64,
    remaining: u64,
    reset_s: u64,
}

impl RateLimit {
    /// A limit named `policy` with the given quota, window, remaining quota and reset time.
    pub fn new(
        policy: &'static str,
        quota: u64,
        window: Duration,
        remaining: u64,
        reset: Duration,
    ) -> Self {
        RateLimit {
            policy,
            quota,
            window_s: whole_seconds(window),
            remaining,
            reset_s: whole_seconds(reset),
        }
    }

    /// A key's state when `over` refused it: the quota is the bucket's
    /// size, the window the time a full bucket takes to drain, `remaining`
    /// the room left and the reset the wait until the refused cost fits.
    ///
    /// ```
    /// use dripfeed::headers::RateLimit;
    /// use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(5.0).burst(10.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 10.0, now)?;
    /// let Err(AdmitError::OverQuota(over)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
    /// let limit = RateLimit::for_key(&over);
    /// assert_eq!(limit.policy_header(), r#""key";q=10;w=2"#);
    /// assert_eq!(limit.header(), r#""key";r=0;t=1"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_key(over: &crate::keyed::OverQuota) -> Self {
        RateLimit::new(
            "key",
            over.size().floor() as u64,
            over.quota().drain_time(),
            // A debt read from a per-key table carries a time's rounding
            // (about 1e-15 of the size): room a hair under a whole unit is it.
            (over.size() - over.debt() + over.size() * 1e-12)
                .max(0.0)
                .floor() as u64,
            over.retry_after(),
        )
    }

    /// The shared queue's state: `depth` of `bound` places taken, drained at `rate`.
    pub(crate) fn queue(depth: usize, bound: usize, rate: f64) -> Self {
        RateLimit::new(
            "queue",
            bound as u64,
            secs(bound as f64 / rate),
            bound.saturating_sub(depth) as u64,
            secs(depth as f64 / rate),
        )
    }

    /// The same state with the reset time `secs`, as a refusal's
    /// `Retry-After` says it (the two fields agree).
    pub(crate) fn with_reset_secs(self, secs: u64) -> Self {
        RateLimit {
            reset_s: secs,
            ..self
        }
    }

    /// The policy's name (`"queue"` or `"key"`).
    pub fn policy(&self) -> &'static str {
        self.policy
    }

    /// The quota: jobs (or cost units) the limit admits per window.
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// Quota still available now.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The `RateLimit-Policy` field value, e.g. `"queue";q=400;w=2`.
    pub fn policy_header(&self) -> String {
        format!("\"{}\";q={};w={}", self.policy, self.quota, self.window_s)
    }

    /// The `RateLimit` field value, e.g. `"queue";r=0;t=2`.
    pub fn header(&self) -> String {
        format!(
            "\"{}\";r={};t={}",
            self.policy, self.remaining, self.reset_s
        )
    }
}
