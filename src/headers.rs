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

/// Every header field a refusal should carry: `Retry-After` when waiting
/// helps, and the `RateLimit` pair when the refusing limit is known.
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
/// assert_eq!(fields[0], ("retry-after", "2".to_string())); // 2 queued / 2 per s = 1 s + jitter
/// assert_eq!(fields[1], ("ratelimit-policy", r#""queue";q=2;w=1"#.to_string()));
/// assert_eq!(fields[2].0, "ratelimit");
/// # }
/// ```
pub fn for_rejected<J>(rejected: &Rejected<J>) -> Vec<(&'static str, String)> {
    let mut fields = Vec::with_capacity(3);
    if let Some(wait) = rejected.retry_after() {
        fields.push(("retry-after", retry_after(wait)));
    }
    if let Some(limit) = rejected.rate_limit() {
        fields.push(("ratelimit-policy", limit.policy_header()));
        fields.push(("ratelimit", limit.header()));
    }
    fields
}
