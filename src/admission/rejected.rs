//! [`Rejected`]: a refused job handed back to its caller, with its
//! [`Reason`] and a wait hint computed from live state.

use std::fmt;
use std::time::Duration;

use super::rate_limit::RateLimit;
use super::reason::Reason;
use crate::util::num::{self, secs, with_jitter};

/// A refused job, handed back to its caller with the reason and a wait hint.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Reason, Throttle};
/// use std::time::Duration;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .capacity(1)
///     .build(|_job: &&str, _attempt| async { Delivery::Done })
///     .unwrap();
/// throttle.pause(); // keep the first job queued
/// throttle.try_submit("first").unwrap();
/// let refused = throttle.try_submit("second").unwrap_err();
/// assert_eq!(refused.reason(), Reason::Overloaded);
/// assert_eq!(refused.status(), 503);
/// // depth 1 at 10 jobs/s: 100 ms, plus at most 20 % jitter
/// let wait = refused.retry_after().unwrap();
/// assert!(wait >= Duration::from_millis(100) && wait <= Duration::from_millis(120));
/// assert_eq!(refused.into_job(), "second");
/// # }
/// ```
pub struct Rejected<J> {
    job: J,
    reason: Reason,
    hint: Hint,
}

/// What a refusal knows about waiting. The queue's hint is kept as the raw
/// state and only turned into durations when asked, so a refusal nobody
/// reads the hint of stays cheap.
#[derive(Debug, Clone, Copy)]
enum Hint {
    None,
    Queue {
        depth: usize,
        bound: usize,
        rate: f64,
        /// Unique to this refusal: its share of the 20 % jitter is drawn
        /// from it when the hint is read.
        seed: u64,
    },
    Known {
        /// Nanoseconds (a `Duration`'s niche would put the variant's tag
        /// in the middle of the hint, which the refusal path pays for).
        wait_ns: u64,
        limit: Option<RateLimit>,
    },
}

impl<J> Rejected<J> {
    /// A refusal made by code of yours (an admission layer in front of a
    /// throttle, say): the job back, why, how long to wait, and the limit's
    /// state for the `RateLimit` fields.
    ///
    /// ```
    /// use dripfeed::{Reason, Rejected};
    /// use std::time::Duration;
    /// let r = Rejected::new("job", Reason::Overloaded, Some(Duration::from_secs(2)), None);
    /// assert_eq!((r.status(), r.retry_after()), (503, Some(Duration::from_secs(2))));
    /// assert_eq!(r.into_job(), "job");
    /// ```
    pub fn new(
        job: J,
        reason: Reason,
        retry_after: Option<Duration>,
        limit: Option<RateLimit>,
    ) -> Self {
        let hint = match retry_after {
            Some(wait) => Hint::Known {
                wait_ns: crate::util::num::nanos(wait),
                limit,
            },
            None => Hint::None,
        };
        Rejected { job, reason, hint }
    }

    /// A refusal by the shared queue as it stands: `depth` of `bound` at
    /// `rate`. Its share of the jitter comes from `seed`, a number unique to
    /// this refusal (no random-number generator on the refusal path).
    #[inline]
    pub(crate) fn queue(job: J, depth: usize, bound: usize, rate: f64, seed: u64) -> Self {
        let hint = Hint::Queue {
            depth,
            bound,
            rate,
            seed,
        };
        Rejected {
            job,
            reason: Reason::Overloaded,
            hint,
        }
    }

    /// Gives the job back.
    ///
    /// ```
    /// use dripfeed::{Reason, Rejected};
    /// let refused = Rejected::new(vec![1u8, 2, 3], Reason::Closed, None, None);
    /// let body: Vec<u8> = refused.into_job(); // to store, or submit elsewhere
    /// assert_eq!(body, [1, 2, 3]);
    /// ```
    pub fn into_job(self) -> J {
        self.job
    }

    /// The refused job.
    ///
    /// ```
    /// use dripfeed::{Reason, Rejected};
    /// let refused = Rejected::new("order-7", Reason::Overloaded, None, None);
    /// assert_eq!(*refused.job(), "order-7");
    /// assert_eq!(refused.reason(), Reason::Overloaded, "still whole after a look");
    /// ```
    pub fn job(&self) -> &J {
        &self.job
    }

    /// Why it was refused.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.begin_shutdown(Duration::ZERO);
    /// assert_eq!(throttle.try_submit(1).unwrap_err().reason(), Reason::Closed);
    /// # }
    /// ```
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// How long to wait before trying again, from live state, with jitter;
    /// `None` when waiting would not help (closed, invalid).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .capacity(5)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..5 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// let wait = throttle.try_submit(5).unwrap_err().retry_after().unwrap();
    /// assert!(wait >= Duration::from_millis(500) && wait <= Duration::from_millis(600), "5 queued at 10/s");
    /// throttle.begin_shutdown(Duration::ZERO);
    /// assert_eq!(throttle.try_submit(6).unwrap_err().retry_after(), None, "closed: waiting won't help");
    /// # }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self.hint {
            Hint::None => None,
            Hint::Queue {
                depth, rate, seed, ..
            } => Some(with_jitter(secs(depth as f64 / rate), unit(seed))),
            Hint::Known { wait_ns, .. } => Some(Duration::from_nanos(wait_ns)),
        }
    }

    /// The wait for a `Retry-After` header, in whole seconds: the wait
    /// rounded up (never earlier than the queue or the key allows), plus a
    /// share of a whole-second spread drawn for this refusal (1 s for waits
    /// up to 5 s, else 20 %), so that callers refused together, told "1.0
    /// to 1.2 s", come back at 1 or 2 s rather than all at 2. The
    /// `RateLimit` field's `t` ([`headers::for_rejected`](crate::headers::for_rejected))
    /// says the same. `None` when waiting would not help.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .capacity(100)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// for job in 0..100 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// // 100 queued at 100/s: 1 s to drain. The header says 1 or 2.
    /// let mut told = [0; 3];
    /// for job in 0..1000 {
    ///     let secs = throttle.try_submit(job).unwrap_err().retry_after_secs().unwrap();
    ///     told[secs as usize] += 1;
    /// }
    /// assert_eq!(told[0], 0);
    /// assert!(told[1] > 300 && told[2] > 300, "{told:?}");
    /// # }
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self.hint {
            Hint::None => None,
            Hint::Queue {
                depth, rate, seed, ..
            } => Some(num::spread_seconds(secs(depth as f64 / rate), unit(seed))),
            Hint::Known { wait_ns, .. } => Some(num::spread_seconds(
                Duration::from_nanos(wait_ns),
                unit(wait_ns.rotate_left(17)),
            )),
        }
    }

    /// The HTTP status for this refusal (503, 429 or 400).
    ///
    /// ```
    /// use dripfeed::{Reason, Rejected};
    /// let status = |reason| Rejected::new((), reason, None, None).status();
    /// assert_eq!(status(Reason::Overloaded), 503);
    /// assert_eq!(status(Reason::OverQuota), 429);
    /// assert_eq!(status(Reason::Invalid), 400);
    /// ```
    pub fn status(&self) -> u16 {
        self.reason.status()
    }

    /// The same refusal carrying `f(job)` instead of the job.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .build(|_: &String, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// throttle.try_submit("a".to_string()).unwrap();
    /// let refused = throttle.try_submit("bcd".to_string()).unwrap_err().map(|job| job.len());
    /// assert_eq!((refused.reason(), refused.into_job()), (Reason::Overloaded, 3));
    /// # }
    /// ```
    pub fn map<K>(self, f: impl FnOnce(J) -> K) -> Rejected<K> {
        Rejected {
            job: f(self.job),
            reason: self.reason,
            hint: self.hint,
        }
    }

    /// The limit that refused the job, for the `RateLimit` header fields.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(2.0)
    ///     .capacity(4)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..4 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// let limit = throttle.try_submit(4).unwrap_err().rate_limit().unwrap();
    /// assert_eq!((limit.policy(), limit.quota(), limit.remaining()), ("queue", 4, 0));
    /// assert_eq!(limit.policy_header(), r#""queue";q=4;w=2"#); // 4 places, 2 s to drain
    /// # }
    /// ```
    pub fn rate_limit(&self) -> Option<RateLimit> {
        match self.hint {
            Hint::None => None,
            Hint::Queue {
                depth, bound, rate, ..
            } => Some(RateLimit::queue(depth, bound, rate)),
            Hint::Known { limit, .. } => limit,
        }
    }
}

/// This refusal's share of the jitter, in [0, 1): from its `seed` (a
/// number unique among its throttle's refusals) mixed with a key this
/// process drew from the operating system.
fn unit(seed: u64) -> f64 {
    num::unit(seed ^ num::process_key())
}

impl<J> fmt::Debug for Rejected<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after())
            .finish_non_exhaustive()
    }
}

impl<J> fmt::Display for Rejected<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Reason::Overloaded => write!(f, "job refused: queue full")?,
            Reason::OverQuota => write!(f, "job refused: key over quota")?,
            Reason::Closed => write!(f, "job refused: throttle closed")?,
            Reason::Invalid => write!(f, "job refused: cost can never be admitted")?,
            Reason::Unavailable { cause } => {
                write!(f, "job refused: unavailable ({})", cause.as_str())?
            }
        }
        if let Some(wait) = self.retry_after() {
            write!(f, ", retry after {wait:?}")?;
        }
        Ok(())
    }
}

impl<J> std::error::Error for Rejected<J> {}

#[cfg(test)]
mod tests {
    use super::unit;

    #[test]
    fn jitter_seeds_spread_evenly_over_the_unit_interval() {
        let mut buckets = [0u32; 10];
        for seed in 0..100_000u64 {
            let u = unit(seed);
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 10.0) as usize] += 1;
        }
        // 10,000 expected in each tenth; a sound mix stays well within 5 %.
        assert!(
            buckets.iter().all(|&n| (9_500..10_500).contains(&n)),
            "{buckets:?}"
        );
        assert_ne!(unit(1), unit(2));
    }
}
