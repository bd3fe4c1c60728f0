//! What is submitted: a job, and how it is to be admitted. The "how to
//! wait" axis is the method ([`Throttle::try_submit`],
//! [`Throttle::submit`], [`Throttle::submit_timeout`]); the "what" axis is
//! this value: a plain job converts into one, and a [`Submission`] adds a
//! key and its cost, a delivery deadline, or an earlier id to admit the
//! job under again.
//!
//! [`Throttle::try_submit`]: crate::Throttle::try_submit
//! [`Throttle::submit`]: crate::Throttle::submit
//! [`Throttle::submit_timeout`]: crate::Throttle::submit_timeout

use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::OnceLock;

use tokio::time::Instant;

/// A job and how it is to be admitted.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::keyed::Quota;
/// use dripfeed::{Delivery, Outcome, Reason, Submission, Throttle};
/// use std::time::Duration;
/// use tokio::time::Instant;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(1.0)
///     .capacity(10)
///     .per_key(100, Quota::per_second(1.0).burst(2.0).unwrap())
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// throttle.try_submit(1).unwrap(); // a plain job
/// throttle.try_submit(Submission::new(2).key("acme", 2.0)).unwrap(); // its tenant charged 2
/// let over = throttle.try_submit(Submission::new(3).key("acme", 1.0)).unwrap_err();
/// assert_eq!(over.reason(), Reason::OverQuota);
/// let soon = Instant::now() + Duration::from_millis(500);
/// throttle.try_submit(Submission::new(4).deadline(soon)).unwrap(); // due at 2 s: too late
/// let again = throttle.try_submit(Submission::new(5).again(42)).unwrap(); // under an earlier id
/// assert_eq!(again.id(), 42);
/// tokio::time::sleep(Duration::from_secs(5)).await;
/// assert_eq!(throttle.stats().outcome(Outcome::Expired), 1);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Submission<'k, J> {
    pub(crate) job: J,
    pub(crate) key: Option<(Key<'k>, f64)>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) id: Option<u64>,
    /// Recorded in the throttle's journal, if it has one (the default).
    pub(crate) journaled: bool,
    /// Attempts it made before it was submitted.
    pub(crate) made: u32,
}

impl<J> Submission<'static, J> {
    /// `job`, admitted as it is: no key, no deadline, a new id.
    ///
    /// ```
    /// use dripfeed::Submission;
    /// assert_eq!(Submission::new(7).into_job(), 7);
    /// ```
    pub fn new(job: J) -> Self {
        Submission {
            job,
            key: None,
            deadline: None,
            id: None,
            journaled: true,
            made: 0,
        }
    }
}

impl<'k, J> Submission<'k, J> {
    /// Charged to `key` (a tenant, a caller, an endpoint) at `cost` (a
    /// batch of 1,000 rows might cost 1,000) in the throttle's per-key
    /// buckets first: over its quota, refused `OverQuota` (429) with the
    /// exact wait; a job the queue then refuses gives the charge back. A
    /// throttle without per-key buckets refuses it `Invalid`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::keyed::Quota;
    /// use dripfeed::{Delivery, Key, Reason, Submission, Throttle};
    /// let s = Submission::new("body").key("acme", 1.0);
    /// let t = Submission::new("body").key(17u64, 3.0);
    /// let u = Submission::new("body").key(Key::of(&("acme", "eu")), 1.0);
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .per_key(1_000, Quota::per_second(1.0).burst(2.0).unwrap())
    ///     .build(|_: &&str, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert!(throttle.try_submit(s).is_ok());
    /// assert_eq!(throttle.try_submit(t).unwrap_err().reason(), Reason::Invalid, "3 > burst 2");
    /// assert!(throttle.try_submit(u).is_ok());
    /// # }
    /// ```
    pub fn key<'a>(self, key: impl Into<Key<'a>>, cost: f64) -> Submission<'a, J> {
        Submission {
            job: self.job,
            key: Some((key.into(), cost)),
            deadline: self.deadline,
            id: self.id,
            journaled: self.journaled,
            made: self.made,
        }
    }

    /// Delivered by `at` or not at all: still queued (or waiting for a
    /// retry) at `at`, it is expired instead, to the dead-letter sink, else
    /// the `on_expired` hook. The builder's `max_queue_wait`, if set,
    /// still applies; the earlier of the two wins.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Submission, Throttle};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(10)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap(); // out at once
    /// let soon = Instant::now() + Duration::from_millis(500);
    /// throttle.try_submit(Submission::new(2).deadline(soon)).unwrap(); // its turn at 1 s
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(throttle.stats().outcome(Outcome::Expired), 1);
    /// # }
    /// ```
    pub fn deadline(mut self, at: Instant) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Admitted again under `id`, the id an earlier admission gave it
    /// ([`Admitted::id`](crate::Admitted::id)), so its receiver sees the id
    /// it may already have deduplicated on (a dead letter redriven, say). A
    /// made-up id may collide with a live job's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Attempt, Delivery, Submission, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// let ids = Arc::new(Mutex::new(Vec::new()));
    /// let seen = ids.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(move |_: &u32, attempt: Attempt| {
    ///         seen.lock().unwrap().push(attempt.id());
    ///         async { Delivery::Done }
    ///     })
    ///     .unwrap();
    /// assert_eq!(throttle.try_submit(Submission::new(1).again(42)).unwrap().id(), 42);
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(*ids.lock().unwrap(), [42], "the receiver sees the earlier id");
    /// # }
    /// ```
    pub fn again(mut self, id: u64) -> Self {
        self.id = Some(id);
        self
    }

    /// Not recorded in the throttle's journal (it has one): the caller
    /// keeps the job durable itself (in its own store, with what it tells
    /// of the job's end) and submits it again after a crash. A shutdown
    /// counts it `kept` like a journaled one, and it is not in the journal.
    /// Without a journal it changes nothing.
    ///
    /// ```
    /// # #[cfg(feature = "journal")]
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Delivery, Outcome, Submission, Throttle};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-unjournaled-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .journal(Journal::open(&dir)?)
    ///     .build(|_: &String, _| async { Delivery::Done })?;
    /// throttle.pause();
    /// throttle.submit(Submission::new("kept by the caller".to_string()).unjournaled()).await?;
    /// let report = throttle.shutdown(Duration::ZERO).await;
    /// assert_eq!(report.stats.outcome(Outcome::Kept), 1);
    /// drop(throttle);
    /// drain.join().await;
    /// assert!(Journal::open(&dir)?.take_recovered().is_empty(), "but not in the journal");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "journal"))]
    /// # fn main() {}
    /// ```
    pub fn unjournaled(mut self) -> Self {
        self.journaled = false;
        self
    }

    /// A job that has made `made` attempts already (before a restart its
    /// caller's own store survived, or elsewhere): its first attempt here
    /// is number `made + 1`, the downstream and the hooks see the numbers
    /// go on, and the retry policy allows it only the attempts it has left
    /// of [`max_attempts`](crate::RetryPolicy::max_attempts). One past
    /// them makes a last attempt (as a job recovered from the journal
    /// does), numbered the policy's last. With a journal, the count is
    /// recorded with the job, so a crash does not give it back either.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::{Attempt, Delivery, RetryPolicy, Submission, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// let tried = Arc::new(Mutex::new(Vec::new()));
    /// let seen = tried.clone();
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(4))
    ///     .build(move |_: &&str, attempt: Attempt| {
    ///         seen.lock().unwrap().push(attempt.number());
    ///         async { Delivery::Retry { after: None } }
    ///     })?;
    /// // Two attempts made before a restart: two are left.
    /// throttle.submit(Submission::new("flaky").attempts_made(2)).await?;
    /// tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    /// assert_eq!(*tried.lock().unwrap(), [3, 4]);
    /// assert_eq!(throttle.stats().outcome(dripfeed::Outcome::Failed), 1, "then it failed for good");
    /// # drop((throttle, drain));
    /// # Ok(())
    /// # }
    /// ```
    pub fn attempts_made(mut self, made: u32) -> Self {
        self.made = made;
        self
    }

    /// The job, back.
    ///
    /// ```
    /// use dripfeed::Submission;
    /// assert_eq!(Submission::new("x").key("k", 1.0).into_job(), "x");
    /// ```
    pub fn into_job(self) -> J {
        self.job
    }

    /// The job, and how it is to be admitted without it: to hold the
    /// job apart (in a set's bound, say) and submit it later as it came
    /// ([`with_job`](Self::with_job)).
    ///
    /// ```
    /// use dripfeed::Submission;
    /// let (job, how) = Submission::new("x").key("acme", 2.0).into_parts();
    /// assert_eq!(job, "x");
    /// let again = how.with_job("y");
    /// assert_eq!(again.into_job(), "y");
    /// ```
    pub fn into_parts(self) -> (J, Submission<'k, ()>) {
        let how = Submission {
            job: (),
            key: self.key,
            deadline: self.deadline,
            id: self.id,
            journaled: self.journaled,
            made: self.made,
        };
        (self.job, how)
    }

    /// The same submission (key, cost, deadline, id, attempts made) of
    /// another job.
    ///
    /// ```
    /// use dripfeed::Submission;
    /// let how = Submission::new(()).again(42);
    /// assert_eq!(how.with_job(7).into_job(), 7);
    /// ```
    pub fn with_job<K>(&self, job: K) -> Submission<'k, K> {
        Submission {
            job,
            key: self.key,
            deadline: self.deadline,
            id: self.id,
            journaled: self.journaled,
            made: self.made,
        }
    }
}

/// A plain job is submitted as it is.
impl<J> From<J> for Submission<'static, J> {
    fn from(job: J) -> Self {
        Submission::new(job)
    }
}

/// A per-key bucket's key: text (a tenant's name; what a shared store
/// keys by, as given) or a number. Any other `Hash` value goes through
/// [`Key::of`].
///
/// ```
/// use dripfeed::Key;
/// let by_name: Key = "acme".into();
/// let by_number: Key = 7u32.into();
/// assert_eq!(by_name.text(), "acme");
/// assert_eq!(by_number.text(), "7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key<'k>(Repr<'k>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Repr<'k> {
    Text(&'k str),
    Number(u64),
}

impl Key<'static> {
    /// The key of any `Hash` value (a tuple, a struct): its hash under
    /// this process's random seed, so no one outside can aim collisions at
    /// it. A number: a store shared by several processes would see a
    /// different one in each; give such a store text keys.
    ///
    /// ```
    /// use dripfeed::Key;
    /// assert_eq!(Key::of(&("acme", 3)), Key::of(&("acme", 3)));
    /// assert_ne!(Key::of(&("acme", 3)), Key::of(&("acme", 4)));
    /// ```
    pub fn of<T: Hash + ?Sized>(value: &T) -> Key<'static> {
        static SEED: OnceLock<RandomState> = OnceLock::new();
        Key(Repr::Number(
            SEED.get_or_init(RandomState::new).hash_one(value),
        ))
    }
}

impl<'k> Key<'k> {
    /// The key as a store keys by it: the text as given, a number in
    /// decimal.
    ///
    /// ```
    /// use dripfeed::Key;
    /// assert_eq!(Key::from("acme").text(), "acme");
    /// ```
    pub fn text(&self) -> Cow<'k, str> {
        match self.0 {
            Repr::Text(t) => Cow::Borrowed(t),
            Repr::Number(n) => Cow::Owned(n.to_string()),
        }
    }

    /// The key's hash under a table's `seed`.
    pub(crate) fn hash_with(&self, seed: &RandomState) -> u64 {
        match self.0 {
            Repr::Text(t) => seed.hash_one(t),
            Repr::Number(n) => seed.hash_one(n),
        }
    }
}

impl<'k> From<&'k str> for Key<'k> {
    fn from(text: &'k str) -> Self {
        Key(Repr::Text(text))
    }
}

impl<'k> From<&'k String> for Key<'k> {
    fn from(text: &'k String) -> Self {
        Key(Repr::Text(text))
    }
}

macro_rules! number_keys {
    ($($t:ty),+) => {$(
        impl From<$t> for Key<'static> {
            fn from(n: $t) -> Self {
                Key(Repr::Number(n as u64))
            }
        }
    )+};
}
number_keys!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);
