//! A throttle with a journal: admission records the job first, every end
//! records that it ended, shutdown keeps what is unfinished, and the build
//! puts what an earlier run left ahead of everything else.
//!
//! Without the `journal` feature these are no-ops the compiler removes.

use crate::admission::rejected::Rejected;
use crate::drain::shared::Shared;
use crate::handle::throttle::{Admitted, Throttle};

#[cfg(feature = "journal")]
pub(crate) use with_journal::requeue;

impl<J: 'static> Throttle<J> {
    /// Like [`try_submit`](Self::try_submit): never waits for room, and at
    /// the bound the overflow policy decides. With a journal
    /// ([`ThrottleBuilder::journal`](crate::ThrottleBuilder::journal),
    /// feature `journal`) it first waits until the job's record is as
    /// durable as the journal promises, so an `Ok` is a promise that
    /// survives a crash: answer a 202 with it. Without a journal it is
    /// `try_submit`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// assert!(throttle.try_submit_durable(1).await.is_ok());
    /// let full = throttle.try_submit_durable(2).await.unwrap_err();
    /// assert_eq!(full.reason(), Reason::Overloaded); // refused at once, not waiting for room
    /// # }
    /// ```
    pub async fn try_submit_durable(&self, job: J) -> Result<Admitted, Rejected<J>> {
        self.admit_durably(crate::util::ids::next(), job).await
    }

    /// Admits again, under its original `id`, a job that was admitted
    /// before and handed off (a dead-letter file's line, say): like
    /// [`try_submit_durable`](Self::try_submit_durable), so its receiver
    /// sees the id it may already have deduplicated on. The id must come
    /// from an earlier admission ([`Admitted::id`]); a made-up one may
    /// collide with a live job's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Attempt, Delivery, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let ids = seen.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(move |_: &u8, a: Attempt| {
    ///         ids.lock().unwrap().push(a.id());
    ///         async { Delivery::Done }
    ///     })
    ///     .unwrap();
    /// let admitted = throttle.resubmit(42, 1).await.unwrap();
    /// assert_eq!(admitted.id(), 42);
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(*seen.lock().unwrap(), vec![42]);
    /// # }
    /// ```
    pub async fn resubmit(&self, id: u64, job: J) -> Result<Admitted, Rejected<J>> {
        self.admit_durably(id, job).await
    }

    /// The journal first, then a place without waiting for room.
    async fn admit_durably(&self, id: u64, job: J) -> Result<Admitted, Rejected<J>> {
        let guard = self.shared.unended(id);
        let job = self.journal_first(id, job).await;
        guard.disarm();
        let job = job?;
        let admitted = self.admit_as(id, crate::admission::holders::NO_KEY, job, None);
        self.shared.after_journaled(id, &admitted);
        admitted
    }

    /// Records `job` as `id` in the journal (if any) and waits until it is
    /// as durable as the journal promises.
    pub(crate) async fn journal_first(&self, id: u64, job: J) -> Result<J, Rejected<J>> {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.shared.journal {
            return self.record(j, id, job).await;
        }
        let _ = id;
        Ok(job)
    }
}

/// Ends job `id`'s journal record if dropped before [`disarm`](Self::disarm):
/// an admission that awaits its record (or a place, or a key store) and is
/// dropped half way, its caller gone, leaves no live record with no job
/// behind it. Without a journal it does nothing.
pub(crate) struct Unended<'a, J: 'static> {
    shared: &'a Shared<J>,
    id: u64,
    armed: bool,
}

impl<J: 'static> Unended<'_, J> {
    /// The admission ran to its end: what it did with the record stands.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl<J: 'static> Drop for Unended<'_, J> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.ended(self.id);
        }
    }
}

impl<J: 'static> Shared<J> {
    /// Job `id` ended for good (not into the dead-letter sink).
    /// A guard that ends `id`'s record unless the admission completes.
    pub(crate) fn unended(&self, id: u64) -> Unended<'_, J> {
        Unended {
            shared: self,
            id,
            armed: true,
        }
    }

    /// After an admission of a journaled job `id`: a refusal ends it, a
    /// deferral dead-letters it.
    #[inline]
    pub(crate) fn after_journaled(&self, id: u64, admitted: &Result<Admitted, Rejected<J>>) {
        match admitted {
            Ok(a) if a.is_deferred() => self.dead_lettered(id),
            Ok(_) => {}
            Err(_) => self.ended(id),
        }
    }
}

#[cfg(feature = "journal")]
mod with_journal {
    use std::time::Duration;

    use crate::admission::reason::{Cause, Reason};
    use crate::admission::rejected::Rejected;
    use crate::handle::throttle::{Admitted, Throttle};
    use crate::journal::journaling::Journaling;
    use crate::journal::{Journal, JournalError, Written};

    /// Queues the jobs an earlier run left unfinished, with their ids, in
    /// the retry structure: due now, ahead of new jobs, outside the bound.
    pub(crate) fn requeue<J>(shared: &crate::drain::shared::Shared<J>, jobs: Vec<(u64, J)>) {
        let (Some(retries), n) = (&shared.retries, jobs.len()) else {
            return;
        };
        if n == 0 {
            return;
        }
        let now = shared.clock.precise();
        for (id, job) in jobs {
            let entry = crate::admission::Entry {
                job,
                id,
                admitted_ns: now,
                deadline_ns: u64::MAX,
                key: crate::admission::holders::NO_KEY,
            };
            if retries.push(entry, 1, 0).is_err() {
                // Room was made for every one of them at build.
                tracing::error!(
                    id,
                    "journal: no room for a recovered job; it stays in the journal"
                );
            }
        }
        metrics::counter!(crate::accounting::metrics::RECOVERED, "throttle" => shared.cfg.name.clone())
            .increment(n as u64);
        tracing::info!(throttle = %shared.cfg.name, jobs = n, "recovered unfinished jobs from the journal");
    }

    /// The wait suggested when the journal is full or failing.
    const JOURNAL_WAIT: Duration = Duration::from_secs(1);

    impl<J: 'static> Throttle<J> {
        /// The journal this throttle records its jobs in, if it has one.
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
        /// use dripfeed::journal::Journal;
        /// use dripfeed::{Delivery, Throttle};
        /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-accessor-{}", std::process::id()));
        /// # let _ = std::fs::remove_dir_all(&dir);
        /// let (throttle, drain) = Throttle::builder()
        ///     .drain_rate(100.0)
        ///     .journal(Journal::open(&dir)?)
        ///     .build(|_: &Vec<u8>, _| async { Delivery::Done })?;
        /// throttle.submit(b"{}".to_vec()).await?;
        /// let journal = throttle.journal().unwrap().clone();
        /// throttle.shutdown(std::time::Duration::from_secs(5)).await; // delivers it
        /// assert_eq!(journal.stats().live, 0); // delivered: ended
        /// # drop((throttle, journal));
        /// # drain.join().await;
        /// # std::fs::remove_dir_all(&dir)?;
        /// # Ok(())
        /// # }
        /// ```
        pub fn journal(&self) -> Option<&Journal> {
            self.shared.journal.as_ref().map(|j| &j.journal)
        }

        /// Sends `job`'s record under `id` (refused at once when closed or
        /// when the journal cannot take it); returns what to await for it.
        fn send_record(
            &self,
            j: &Journaling<J>,
            id: u64,
            job: J,
        ) -> Result<(Option<Written>, J), Rejected<J>> {
            let s = &*self.shared;
            if s.admission.is_closed() {
                return Err(s.refuse(job, Reason::Closed));
            }
            match j.journal.admit(id, |out| j.encode_record(&job, out)) {
                Ok(wait) => Ok((wait, job)),
                Err(e) => Err(refuse(self, job, e)),
            }
        }

        /// Records `job` under `id` and waits for its record.
        pub(crate) async fn record(
            &self,
            j: &Journaling<J>,
            id: u64,
            job: J,
        ) -> Result<J, Rejected<J>> {
            let (wait, job) = self.send_record(j, id, job)?;
            if let Err(e) = j.journal.admitted(wait).await {
                j.journal.end(id);
                return Err(refuse(self, job, e));
            }
            Ok(job)
        }

        /// `try_submit` with a journal: the record is sent, not awaited.
        pub(crate) fn admit_journaled(
            &self,
            j: &Journaling<J>,
            key: u64,
            job: J,
            until: Option<u64>,
        ) -> Result<Admitted, Rejected<J>> {
            let id = crate::util::ids::next();
            let (_, job) = self.send_record(j, id, job)?;
            let admitted = self.admit_as(id, key, job, until);
            self.shared.after_journaled(id, &admitted);
            admitted
        }

        /// `submit` with a journal: the record is awaited, then a place.
        pub(crate) async fn submit_journaled(
            &self,
            j: &Journaling<J>,
            job: J,
        ) -> Result<Admitted, Rejected<J>> {
            let id = crate::util::ids::next();
            let guard = self.shared.unended(id);
            let job = match self.record(j, id, job).await {
                Ok(job) => job,
                Err(refused) => {
                    guard.disarm();
                    return Err(refused);
                }
            };
            let admitted = self.submit_as(id, job).await;
            guard.disarm();
            self.shared.after_journaled(id, &admitted);
            admitted
        }
    }

    /// A journal that cannot take a job: 503 with a short wait when it is
    /// full or failing, 400 for a job too large to record.
    fn refuse<J: 'static>(throttle: &Throttle<J>, job: J, e: JournalError) -> Rejected<J> {
        let s = &*throttle.shared;
        let cause = match e {
            JournalError::TooLarge { .. } => return s.refuse(job, Reason::Invalid),
            JournalError::Full { .. } => Cause::JournalFull,
            _ => Cause::JournalFailed,
        };
        // Counted (`rejected_total`); the journal logs each episode once.
        tracing::debug!(throttle = %s.cfg.name, error = %e, "journal refused a job");
        s.refuse_with(
            job,
            Reason::Unavailable { cause },
            Some(crate::util::num::jittered(JOURNAL_WAIT)),
            None,
        )
    }
}
