//! Submitting, on two axes. How to wait is the method:
//!
//! | method | waits for room | awaits the journal and a key store |
//! | --- | --- | --- |
//! | [`try_submit`](Throttle::try_submit) | no: the overflow policy decides at once | no (a journal's record is written, not awaited; a key store cannot be used) |
//! | [`submit`](Throttle::submit) | yes, until there is room (the policy does not apply) | yes |
//! | [`submit_timeout`](Throttle::submit_timeout) | at most the time given, then the policy decides (zero: at once) | yes |
//!
//! What is submitted is a [`Submission`]: a plain job, or one with a key
//! and its cost, a delivery deadline, or an earlier id. The awaited paths
//! admit in one order: the journal, the key, a place; `try_submit`
//! charges a key in its table first (it answers at once), then records
//! the job and takes a place. A key charged is given back whenever the
//! job is not queued.

use std::time::Duration;

use super::submission::{Key, Submission};
use crate::admission::holders::{NO_KEY, key_of};
use crate::admission::reason::Reason;
use crate::admission::rejected::Rejected;
use crate::admission::{Place, Terms};
use crate::handle::throttle::{Admitted, Throttle};
use crate::keyed::{BucketStore, KeyedBuckets, Prehashed};

/// Why a key was not charged: its table's answer (`None`: no table), or
/// its store's.
enum Uncharged {
    Table(Option<crate::keyed::AdmitError>),
    Store(crate::keyed::BucketError),
}

/// How long a submission waits for room.
#[derive(Clone, Copy)]
enum Wait {
    /// Until there is room.
    Forever,
    /// At most this long, then the overflow policy decides.
    AtMost(Duration),
}

/// A key charged, to give back if the queue refuses the job (or the
/// submitter goes away while it waits for room): given back when dropped
/// unless [`kept`](Charge::keep).
struct Charge<'a>(Option<Charged<'a>>);

/// What was charged where.
enum Charged<'a> {
    Table(&'a KeyedBuckets<u64, Prehashed>, u64, f64),
    Store(std::sync::Arc<dyn BucketStore>, String, f64),
}

impl Charge<'_> {
    /// Nothing charged.
    const NONE: Charge<'static> = Charge(None);

    /// The job was queued: the charge stands.
    fn keep(&mut self) {
        self.0 = None;
    }

    /// Gives the charge back now, a store's awaited: the refusal that
    /// follows leaves the key as it found it.
    async fn refund(&mut self) {
        if let Some(Charged::Store(store, key, cost)) = &self.0 {
            let (store, key, cost) = (store.clone(), key.clone(), *cost);
            // Cleared once given back: a submitter gone meanwhile leaves it
            // to the drop, in the background.
            if let Err(e) = store.refund(&key, cost).await {
                tracing::warn!(key, error = %e, "could not refund a key's charge after the queue refused");
            }
            self.0 = None;
        }
        // A table's is given back as it drops.
    }

    /// The key's hash for its share of the queue (a table's key).
    fn hash(&self) -> u64 {
        match &self.0 {
            Some(Charged::Table(_, k, _)) => key_of(*k),
            _ => NO_KEY,
        }
    }
}

impl Drop for Charge<'_> {
    /// Gives the charge back: a table's at once; a store's in the
    /// background (a submitter gone while it waited for room cannot await
    /// it; a refusal awaits it first, [`Charge::refund`]).
    fn drop(&mut self) {
        match self.0.take() {
            None => {}
            Some(Charged::Table(table, k, cost)) => {
                let _ = table.settle(&k, cost, 0.0);
            }
            Some(Charged::Store(store, key, cost)) => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        if let Err(e) = store.refund(&key, cost).await {
                            tracing::warn!(key, error = %e, "could not refund a key's charge after the queue refused");
                        }
                    });
                }
            }
        }
    }
}

impl<J: 'static> Throttle<J> {
    /// Admits a job now or refuses it at once; never waits.
    ///
    /// Under the bound the job is queued. At the bound the overflow policy
    /// decides: tail-drop refuses it (`Err`, the job handed back with a
    /// `retry_after`), head-drop evicts the oldest queued job and queues
    /// this one, dead-letter offers it to the sink (`Ok(Deferred)`, or `Err`
    /// if the sink is full). A [`Submission`] with a key is charged in the
    /// throttle's own per-key table first ([`per_key`](crate::ThrottleBuilder::per_key);
    /// a [`key_store`](crate::ThrottleBuilder::key_store) is awaited: use
    /// [`submit_timeout`](Self::submit_timeout)). With a journal the job's
    /// record is written, not awaited: for an answer that survives a crash,
    /// use [`submit_timeout`](Self::submit_timeout) with no wait. After
    /// shutdown every job is refused as `Closed`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(2)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// assert!(throttle.try_submit(1).is_ok());
    /// assert!(throttle.try_submit(2).is_ok());
    /// let refused = throttle.try_submit(3).unwrap_err();
    /// assert_eq!((refused.reason(), refused.into_job()), (Reason::Overloaded, 3));
    /// # }
    /// ```
    #[inline]
    pub fn try_submit<'k>(
        &self,
        submission: impl Into<Submission<'k, J>>,
    ) -> Result<Admitted, Rejected<J>> {
        let Submission {
            job,
            key,
            deadline,
            id,
            journaled,
            made,
        } = submission.into();
        let terms = self.shared.terms(deadline, made);
        match key {
            None => self.admit_now(id, NO_KEY, job, terms, journaled),
            Some((key, cost)) => self.admit_keyed_now(key, cost, job, (id, journaled), terms),
        }
    }

    /// [`try_submit`](Self::try_submit) of a keyed job: the key in the
    /// throttle's table first (a 429 ends here), then a place; a queue that
    /// refuses gives the key its cost back.
    fn admit_keyed_now(
        &self,
        key: Key<'_>,
        cost: f64,
        job: J,
        (id, journaled): (Option<u64>, bool),
        terms: Terms,
    ) -> Result<Admitted, Rejected<J>> {
        let mut charge = match self.charge_table(&key, cost) {
            Ok(charge) => charge,
            Err(e) => return Err(self.refuse_charge(job, e)),
        };
        let hash = charge.hash();
        let admitted = self.admit_now(id, hash, job, terms, journaled);
        if admitted.is_ok() {
            charge.keep();
        }
        admitted
    }

    /// Admits a job, waiting for room when the queue is at its bound (the
    /// overflow policy does not apply: the caller chose to wait), and for
    /// the journal's record and a key store's answer. Cancel-safe: a
    /// dropped wait holds no place and gives a key's charge back. Refused
    /// when the throttle closes (`Closed`), the key is over its quota
    /// (`OverQuota`), or a store or the journal cannot take it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .capacity(1)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// let start = tokio::time::Instant::now();
    /// for job in 0..5 {
    ///     assert!(throttle.submit(job).await.unwrap().is_queued());
    /// }
    /// // one place, drained at 10/s: the producer was held back to the drain rate
    /// assert!(start.elapsed() >= Duration::from_millis(300));
    /// # }
    /// ```
    pub async fn submit<'k>(
        &self,
        submission: impl Into<Submission<'k, J>>,
    ) -> Result<Admitted, Rejected<J>> {
        let submission = submission.into();
        if self.plain(&submission) {
            // Nothing to record or charge first: straight to a place.
            let s = &*self.shared;
            let Submission {
                job,
                deadline,
                made,
                ..
            } = submission;
            let terms = s.terms(deadline, made);
            return match s.admission.reserve_for(NO_KEY).await {
                Ok(place) => self.queue(place, crate::util::ids::next(), job, terms),
                Err(_) => Err(s.refuse(job, Reason::Closed)),
            };
        }
        self.submit_waiting(submission, Wait::Forever).await
    }

    /// Whether `submission` needs nothing before its place: no key, no
    /// id of its own, no journal to record it in.
    #[inline]
    fn plain(&self, submission: &Submission<'_, J>) -> bool {
        #[cfg(feature = "journal")]
        if self.shared.journal.is_some() && submission.journaled {
            return false;
        }
        submission.key.is_none() && submission.id.is_none()
    }

    /// Admits a job, waiting at most `wait` for room; then (or at once,
    /// with no wait) the overflow policy decides, as in
    /// [`try_submit`](Self::try_submit). The journal's record and a key
    /// store's answer are awaited either way: with a journal an `Ok` is a
    /// promise that survives a crash (answer a 202 with it), and a key is
    /// charged in whichever store the throttle has (its own table, Redis,
    /// PostgreSQL: [`key_store`](crate::ThrottleBuilder::key_store)). A
    /// store that fails is a 503 (`Unavailable`, cause `store_down`), never
    /// a 429.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// use dripfeed::{Delivery, Reason, Submission, Throttle};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let quota = Quota::per_second(1.0).burst(2.0)?;
    /// let tenants: Arc<dyn BucketStore> = Arc::new(KeyedBuckets::<String>::new(10_000, quota)?);
    /// // or RedisBuckets::new(conn, "tenants", quota), or PgBuckets::new(pool, "tenants", quota)?
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .capacity(10)
    ///     .key_store(tenants.clone())
    ///     .build(|_: &u32, _| async { Delivery::Done })?;
    /// let now = Duration::ZERO; // no wait for room
    /// throttle.submit_timeout(Submission::new(1).key("acme", 1.0), now).await?;
    /// throttle.submit_timeout(Submission::new(2).key("acme", 1.0), now).await?;
    /// let refused = throttle.submit_timeout(Submission::new(3).key("acme", 1.0), now).await.unwrap_err();
    /// assert_eq!((refused.reason(), refused.status()), (Reason::OverQuota, 429));
    /// assert_eq!(refused.into_job(), 3, "the job comes back");
    /// assert_eq!(tenants.debt("acme").await?, 2.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn submit_timeout<'k>(
        &self,
        submission: impl Into<Submission<'k, J>>,
        wait: Duration,
    ) -> Result<Admitted, Rejected<J>> {
        self.submit_waiting(submission.into(), Wait::AtMost(wait))
            .await
    }

    /// The one awaited admission: the journal, the key, a place.
    async fn submit_waiting(
        &self,
        submission: Submission<'_, J>,
        wait: Wait,
    ) -> Result<Admitted, Rejected<J>> {
        let Submission {
            job,
            key,
            deadline,
            id,
            journaled,
            made,
        } = submission;
        let s = &*self.shared;
        let terms = s.terms(deadline, made);
        let id = id.unwrap_or_else(crate::util::ids::next);
        // The journal first: the job is durable before anything is charged
        // for it; a submitter gone half way leaves no live record behind.
        let guard = s.unended(id);
        let job = match journaled {
            true => match self.journal_first(id, made, job).await {
                Ok(job) => job,
                Err(refused) => {
                    guard.disarm();
                    return Err(refused);
                }
            },
            false => job,
        };
        // Then the key (a 429 or a store failure ends here).
        let (mut charge, hash) = match key {
            None => (Charge::NONE, NO_KEY),
            Some((key, cost)) => match self.charge(&key, cost).await {
                Ok(charged) => charged,
                Err(why) => {
                    guard.disarm();
                    s.ended(id);
                    return Err(match why {
                        Uncharged::Table(e) => self.refuse_charge(job, e),
                        Uncharged::Store(e) => self.refuse_stored(job, e),
                    });
                }
            },
        };
        // Then a place, never held across an await.
        let admitted = match wait {
            Wait::Forever => match s.admission.reserve_for(hash).await {
                Ok(place) => self.queue(place, id, job, terms),
                Err(_) => Err(s.refuse(job, Reason::Closed)),
            },
            Wait::AtMost(d) if d.is_zero() => self.admit_as(id, hash, job, terms),
            Wait::AtMost(d) => {
                let place: Option<Place<'_, J>> =
                    match tokio::time::timeout(d, s.admission.reserve_for(hash)).await {
                        Ok(Ok(place)) => Some(place),
                        Ok(Err(_)) => return self.closed_after(guard, id, job),
                        Err(_) => None,
                    };
                match place {
                    Some(place) => self.queue(place, id, job, terms),
                    // No room in time: the policy decides, as at once.
                    None => self.admit_as(id, hash, job, terms),
                }
            }
        };
        guard.disarm();
        s.after_journaled(id, &admitted);
        match admitted.is_ok() {
            true => charge.keep(),
            false => charge.refund().await,
        }
        admitted
    }

    /// Closed while waiting for room: refused, the record ended.
    fn closed_after(
        &self,
        guard: super::durable::Unended<'_, J>,
        id: u64,
        job: J,
    ) -> Result<Admitted, Rejected<J>> {
        guard.disarm();
        let refused = Err(self.shared.refuse(job, Reason::Closed));
        self.shared.after_journaled(id, &refused);
        refused
    }

    /// Charges `key` its `cost` in whichever store the throttle has (a
    /// shared store awaited; else its own table): the charge and the key's
    /// hash for its share of the queue, or how to refuse the job.
    async fn charge(&self, key: &Key<'_>, cost: f64) -> Result<(Charge<'_>, u64), Uncharged> {
        let s = &*self.shared;
        let Some(store) = &s.store else {
            return match self.charge_table(key, cost) {
                Ok(charge) => {
                    let hash = charge.hash();
                    Ok((charge, hash))
                }
                Err(e) => Err(Uncharged::Table(e)),
            };
        };
        let text = key.text();
        match store.try_admit(&text, cost).await {
            Ok(_) => {
                let hash = key_of(key.hash_with(&s.key_hasher));
                let charged = Charged::Store(store.clone(), text.into_owned(), cost);
                Ok((Charge(Some(charged)), hash))
            }
            Err(e) => Err(Uncharged::Store(e)),
        }
    }

    /// Charges `key` its `cost` in the throttle's own table.
    fn charge_table(
        &self,
        key: &Key<'_>,
        cost: f64,
    ) -> Result<Charge<'_>, Option<crate::keyed::AdmitError>> {
        let keyed = self.shared.keyed.as_ref().ok_or(None)?;
        let k = key.hash_with(&keyed.hasher);
        keyed.table.try_admit(&k, cost).map_err(Some)?;
        Ok(Charge(Some(Charged::Table(&keyed.table, k, cost))))
    }

    /// An admission that takes no wait for room: under `id` (or a new
    /// one), recorded in the journal if there is one (written, not
    /// awaited), then a place or the overflow policy. Out of line: its
    /// result is built straight into the caller's slot.
    #[inline(never)]
    pub(crate) fn admit_now(
        &self,
        id: Option<u64>,
        key: u64,
        job: J,
        terms: Terms,
        journaled: bool,
    ) -> Result<Admitted, Rejected<J>> {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.shared.journal
            && journaled
        {
            return self.admit_journaled(j, id, key, job, terms);
        }
        #[cfg(not(feature = "journal"))]
        let _ = journaled;
        let id = id.unwrap_or_else(crate::util::ids::next);
        self.admit_as(id, key, job, terms)
    }
}
