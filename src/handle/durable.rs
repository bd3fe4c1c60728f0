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
    /// Records `job` as `id` in the journal (if any) and waits until it is
    /// as durable as the journal promises, with the attempts it `made`
    /// before it was submitted.
    pub(crate) async fn journal_first(&self, id: u64, made: u32, job: J) -> Result<J, Rejected<J>> {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.shared.journal {
            return self.record(j, id, made, job).await;
        }
        let _ = (id, made);
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

    use crate::admission::Terms;
    use crate::admission::reason::{Cause, Reason};
    use crate::admission::rejected::Rejected;
    use crate::handle::throttle::{Admitted, Throttle};
    use crate::journal::journaling::Journaling;
    use crate::journal::{Journal, JournalError, Written};

    /// Queues the jobs an earlier run left unfinished, with their ids, in
    /// the retry structure, ahead of new jobs, outside the bound: due now,
    /// or, for one that was waiting for a retry, when that retry was due
    /// (at most the policy's longest backoff from now).
    pub(crate) fn requeue<J>(shared: &crate::drain::shared::Shared<J>, jobs: Vec<(u64, J)>) {
        let (Some(retries), n) = (&shared.retries, jobs.len()) else {
            return;
        };
        if n == 0 {
            return;
        }
        let now = shared.clock.precise();
        let journal = shared.journal.as_ref().map(|j| &j.journal);
        for (id, job) in jobs {
            // The next of the attempts it made before the restart, or, if
            // this run's policy allows fewer, its last one.
            let tried = journal.map(|j| j.tried(id)).unwrap_or_default();
            let number = shared.first_attempt(tried.made);
            let wait = wait_until(tried.due_ms).min(retries.policy.cap());
            let due = now.saturating_add(crate::util::num::nanos(wait));
            let entry = crate::admission::Entry {
                job,
                id,
                admitted_ns: now,
                deadline_ns: u64::MAX,
                key: crate::admission::holders::NO_KEY,
                attempt: number,
            };
            if retries.push(entry, number, due).is_err() {
                // Room was made for every one of them at build.
                tracing::error!(
                    id,
                    "journal: no room for a recovered job; it stays in the journal"
                );
                continue;
            }
            // One that had failed before waits for its retry, as the hook
            // hears (its attempts so far, when the next is due).
            if tried.made > 0
                && let Some(hook) = &shared.hook
            {
                hook.retry_scheduled(crate::drain::downstream::Attempt::new(id, number), wait);
            }
        }
        metrics::counter!(crate::accounting::metrics::RECOVERED, "throttle" => shared.cfg.name.clone())
            .increment(n as u64);
        tracing::info!(throttle = %shared.cfg.name, jobs = n, "recovered unfinished jobs from the journal");
    }

    /// The time left until `due_ms` (ms since the Unix epoch; 0: none).
    fn wait_until(due_ms: u64) -> Duration {
        Duration::from_millis(due_ms.saturating_sub(crate::util::clock::unix_ms()))
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
            made: u32,
            job: J,
        ) -> Result<(Option<Written>, J), Rejected<J>> {
            let s = &*self.shared;
            if s.admission.is_closed() {
                return Err(s.refuse(job, Reason::Closed));
            }
            match j.journal.admit(id, made, |out| j.encode_record(&job, out)) {
                Ok(wait) => Ok((wait, job)),
                Err(e) => Err(refuse(self, job, e)),
            }
        }

        /// Records `job` under `id` (having made `made` attempts) and
        /// waits for its record.
        pub(crate) async fn record(
            &self,
            j: &Journaling<J>,
            id: u64,
            made: u32,
            job: J,
        ) -> Result<J, Rejected<J>> {
            let (wait, job) = self.send_record(j, id, made, job)?;
            if let Err(e) = j.journal.admitted(wait).await {
                j.journal.end(id);
                return Err(refuse(self, job, e));
            }
            Ok(job)
        }

        /// An admission that takes no wait for room, with a journal: the
        /// record under `id` (or a new one) is sent, not awaited.
        pub(crate) fn admit_journaled(
            &self,
            j: &Journaling<J>,
            id: Option<u64>,
            key: u64,
            job: J,
            terms: Terms,
        ) -> Result<Admitted, Rejected<J>> {
            let id = id.unwrap_or_else(crate::util::ids::next);
            let (_, job) = self.send_record(j, id, terms.made, job)?;
            let admitted = self.admit_as(id, key, job, terms);
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
