//! Rendering the wait hints as HTTP header fields: `Retry-After` and the IETF
//! `RateLimit` / `RateLimit-Policy` fields (draft-ietf-httpapi-ratelimit-headers).
//!
//! The values come from live state (queue depth and drain rate, or a key's
//! debt); this module only formats them.

use std::time::Duration;

pub use crate::admission::rate_limit::RateLimit;
use crate::admission::rejected::Rejected;

/// Whole seconds for a header: rounded up, at least 1.
///
/// ```
/// use dripfeed::headers::whole_seconds;
/// use std::time::Duration;
/// assert_eq!(whole_seconds(Duration::ZERO), 1);
/// assert_eq!(whole_seconds(Duration::from_millis(1001)), 2);
/// assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
/// assert_eq!(whole_seconds(Duration::MAX), u64::MAX); // saturates
/// ```
pub fn whole_seconds(d: Duration) -> u64 {
    crate::util::num::whole_seconds(d)
}

/// The `Retry-After` field value for a wait: whole seconds, rounded up, at least 1.
///
/// ```
/// use dripfeed::headers::retry_after;
/// use std::time::Duration;
/// assert_eq!(retry_after(Duration::from_millis(2400)), "3");
/// ```
pub fn retry_after(wait: Duration) -> String {
    whole_seconds(wait).to_string()
}

/// A wait hint with the same jitter the crate adds to its own (up to 20 %
/// more), so callers refused together do not all come back at once.
///
/// ```
/// use dripfeed::headers::jittered;
/// use std::time::Duration;
/// let wait = jittered(Duration::from_secs(10));
/// assert!(wait >= Duration::from_secs(10) && wait <= Duration::from_secs(12));
/// ```
pub fn jittered(wait: Duration) -> Duration {
    crate::util::num::jittered(wait)
}

/// A wait rendered for a header so that callers told it together spread
/// out: the wait rounded up (at least 1), plus a random share of a
/// whole-second spread (1 s for waits up to 5 s, else 20 %), drawn from a
/// generator this process seeded from the operating system. Use it for a
/// `Retry-After` you compute yourself; a refusal's own is
/// [`Rejected::retry_after_secs`].
///
/// ```
/// use dripfeed::headers::spread_seconds;
/// use std::time::Duration;
/// let told: Vec<u64> = (0..1000).map(|_| spread_seconds(Duration::from_millis(1100))).collect();
/// assert!(told.iter().all(|&s| s == 2 || s == 3), "never below the wait");
/// assert!(told.iter().filter(|&&s| s == 2).count() > 300);
/// assert!(told.iter().filter(|&&s| s == 3).count() > 300);
/// ```
pub fn spread_seconds(wait: Duration) -> u64 {
    crate::util::num::spread_seconds(wait, fastrand::f64())
}

/// The header fields of a refusal by a [`KeyedBuckets`](crate::keyed::KeyedBuckets)
/// (or any [`BucketStore`](crate::keyed::BucketStore)) that found the key
/// over its quota: `Retry-After` (whole seconds, spread as
/// [`spread_seconds`] does) and the `RateLimit` pair of the key
/// ([`RateLimit::for_key`]), its `t` the same number.
///
/// ```
/// use dripfeed::headers;
/// use dripfeed::keyed::{AdmitError, Bucket, Quota};
/// let now = tokio::time::Instant::now();
/// let q = Quota::per_second(1.0).burst(1.0)?;
/// let mut b = Bucket::new(now);
/// b.try_admit_at(&q, 1.0, now)?;
/// let Err(AdmitError::OverQuota(over)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
/// let fields = headers::for_over_quota(&over);
/// let secs: u64 = fields[0].1.parse()?;
/// assert!(fields[0].0 == "retry-after" && (1..=2).contains(&secs));
/// assert_eq!(fields[1], ("ratelimit-policy", r#""key";q=1;w=1"#.to_string()));
/// assert_eq!(fields[2], ("ratelimit", format!(r#""key";r=0;t={secs}"#)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn for_over_quota(over: &crate::keyed::OverQuota) -> Vec<(&'static str, String)> {
    let secs = spread_seconds(over.retry_after());
    let limit = RateLimit::for_key(over).with_reset_secs(secs);
    vec![
        ("retry-after", secs.to_string()),
        ("ratelimit-policy", limit.policy_header()),
        ("ratelimit", limit.header()),
    ]
}

/// Every header field a refusal should carry: `Retry-After` when waiting
/// helps (whole seconds, spread: see [`Rejected::retry_after_secs`]), and
/// the `RateLimit` pair when the refusing limit is known, its `t` the same
/// number as `Retry-After`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Throttle, headers};
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(2.0)
///     .capacity(2)
///     .build(|_job: &u8, _attempt| async { Delivery::Done })
///     .unwrap();
/// throttle.pause();
/// throttle.try_submit(1).unwrap();
/// throttle.try_submit(2).unwrap();
/// let refused = throttle.try_submit(3).unwrap_err();
/// let fields = headers::for_rejected(&refused);
/// let secs = refused.retry_after_secs().unwrap(); // 2 queued / 2 per s = 1 s: told 1 or 2
/// assert!(secs == 1 || secs == 2);
/// assert_eq!(fields[0], ("retry-after", secs.to_string()));
/// assert_eq!(fields[1], ("ratelimit-policy", r#""queue";q=2;w=1"#.to_string()));
/// assert_eq!(fields[2], ("ratelimit", format!(r#""queue";r=0;t={secs}"#)));
/// # }
/// ```
pub fn for_rejected<J>(rejected: &Rejected<J>) -> Vec<(&'static str, String)> {
    let mut fields = Vec::with_capacity(3);
    let secs = rejected.retry_after_secs();
    if let Some(secs) = secs {
        fields.push(("retry-after", secs.to_string()));
    }
    if let Some(limit) = rejected.rate_limit() {
        let limit = match secs {
            Some(secs) => limit.with_reset_secs(secs),
            None => limit,
        };
        fields.push(("ratelimit-policy", limit.policy_header()));
        fields.push(("ratelimit", limit.header()));
    }
    fields
}
