//! One journal for the whole set (feature `journal`): every destination's
//! throttle records its jobs in it
//! ([`ThrottleBuilder::shared_journal`](crate::ThrottleBuilder::shared_journal)),
//! each record tagged with its destination's name, and at build the jobs an
//! earlier run left unfinished go back to their destinations, with their
//! ids, ahead of new ones.

use std::collections::HashMap;

use crate::ThrottleBuilder;
use crate::journal::{DecodeError, JobCodec, Journal, Recovered};

use super::{Destinations, DestinationsBuilder};

/// Gives a destination's builder the set's journal, tagged with its name,
/// and the jobs recovered for it.
type Attach<J> =
    dyn Fn(ThrottleBuilder<J>, &str, Vec<(u64, J)>) -> ThrottleBuilder<J> + Send + Sync;

/// The set's journal.
pub(crate) struct SetJournal<J> {
    pub(crate) journal: Journal,
    pub(crate) attach: Box<Attach<J>>,
}

/// The set's journal, with what it found at open, until the set is built.
pub(crate) struct Recovery<J> {
    set: SetJournal<J>,
    decode: fn(&[u8]) -> Result<J, DecodeError>,
    records: Vec<Recovered>,
}

/// Jobs recovered for one destination, with their ids.
pub(crate) type Jobs<J> = Vec<(u64, J)>;

/// Told of each job recovered from the journal: its destination, id, job.
pub(crate) type OnRecovered<J> = dyn Fn(&str, u64, &J) + Send + Sync;

impl<J> Recovery<J> {
    /// Splits the records by destination. A record without a destination
    /// (written by a single throttle on the same directory) goes to `sole`,
    /// the only destination named in the configuration; with none or
    /// several it stays in the journal. A job that no longer decodes is
    /// logged and dropped from the journal, as a single throttle does.
    pub(crate) fn sort(self, sole: Option<&str>) -> (SetJournal<J>, Vec<(String, Jobs<J>)>) {
        let mut by_dest: HashMap<String, Jobs<J>> = HashMap::new();
        let mut untagged = 0usize;
        for r in self.records {
            let dest = match (r.tag, sole) {
                (Some(tag), _) => tag,
                (None, Some(dest)) => dest.to_owned(),
                (None, None) => {
                    untagged += 1;
                    continue;
                }
            };
            match (self.decode)(&r.job) {
                Ok(job) => by_dest.entry(dest).or_default().push((r.id, job)),
                Err(e) => {
                    tracing::error!(id = r.id, len = r.job.len(), error = %e, "journal: a recovered job does not decode; dropped");
                    self.set.journal.discard(r.id);
                }
            }
        }
        if untagged > 0 {
            tracing::warn!(
                jobs = untagged,
                "journal: recovered jobs name no destination and the configuration names more or fewer than one; they stay in the journal"
            );
        }
        let mut groups: Vec<_> = by_dest.into_iter().collect();
        for (_, jobs) in &mut groups {
            jobs.sort_by_key(|(id, _)| *id); // admission order
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        (self.set, groups)
    }
}

impl<J: JobCodec + Send + Sync + 'static> DestinationsBuilder<J> {
    /// Records every destination's jobs in one `journal`, each record
    /// naming its destination, and at build gives what an earlier run left
    /// unfinished back to its destination (made if the configuration no
    /// longer names it), with the ids the jobs had, ahead of new ones.
    ///
    /// [`submit_timeout`](Destinations::submit_timeout) and
    /// [`submit`](Destinations::submit) answer once the job's
    /// record is durable; [`try_submit`](Destinations::try_submit) sends
    /// it without waiting. [`shutdown`](Destinations::shutdown) leaves
    /// unfinished jobs in the journal (counted
    /// [`kept`](super::DestinationStats::kept)) and flushes it. A template
    /// with a journal of its own is refused at build
    /// ([`DestinationError::Template`](super::DestinationError::Template)).
    /// Records written by a single throttle (they name no destination) go
    /// to the only destination named in the configuration, or stay in the
    /// journal.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Attempt, Delivery, RetryPolicy, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-set-journal-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let failing = Throttle::builder().drain_rate(10.0).retries(RetryPolicy::new(5));
    /// let set = Destinations::builder(failing)
    ///     .journal(Journal::open(&dir)?)
    ///     .build(|_: &str| |_: &String, _| async { Delivery::Retry { after: None } })?;
    /// let a = set.try_submit("a", "to a".to_string())?;
    /// set.try_submit("b", "to b".to_string())?;
    /// let (stats, returned) = set.shutdown(Duration::ZERO).await;
    /// assert_eq!(stats.iter().map(|s| s.kept()).sum::<u64>(), 2);
    /// assert!(returned.is_empty(), "kept in the journal, not handed back");
    /// drop(set);
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .journal(Journal::open(&dir)?)
    ///     .build(move |name: &str| {
    ///         let (log, name) = (log.clone(), name.to_string());
    ///         move |job: &String, at: Attempt| {
    ///             log.lock().unwrap().push((name.clone(), job.clone(), at.id()));
    ///             async { Delivery::Done }
    ///         }
    ///     })?;
    /// set.shutdown(Duration::from_secs(5)).await; // delivers what was recovered
    /// let mut seen = seen.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen[0], ("a".to_string(), "to a".to_string(), a.id()));
    /// assert_eq!(seen[1].0, "b");
    /// # drop(set);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn journal(mut self, journal: Journal) -> Self {
        let records = journal.take_recovered();
        let shared = journal.clone();
        self.journal = Some(Recovery {
            set: SetJournal {
                journal,
                attach: Box::new(move |b, tag, recovered| {
                    b.shared_journal(shared.clone(), tag, recovered)
                }),
            },
            decode: J::decode,
            records,
        });
        self
    }

    /// Tells `seen` of each job recovered from the journal as [`build`]
    /// gives it back to its destination: the destination, the job's id and
    /// the job (before any of them is delivered), so a status table, say,
    /// knows every job the set holds from the start.
    ///
    /// [`build`]: DestinationsBuilder::build
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Delivery, RetryPolicy, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("dripfeed-doc-on-recovered-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let failing = Throttle::builder().drain_rate(10.0).retries(RetryPolicy::new(5));
    /// let set = Destinations::builder(failing)
    ///     .journal(Journal::open(&dir)?)
    ///     .build(|_: &str| |_: &String, _| async { Delivery::Retry { after: None } })?;
    /// let id = set.try_submit("a", "to a".to_string())?.id();
    /// set.shutdown(Duration::ZERO).await; // left in the journal
    /// drop(set);
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .journal(Journal::open(&dir)?)
    ///     .on_recovered(move |dest: &str, id: u64, job: &String| {
    ///         log.lock().unwrap().push((dest.to_string(), id, job.clone()));
    ///     })
    ///     .build(|_: &str| |_: &String, _| async { Delivery::Done })?;
    /// assert_eq!(*seen.lock().unwrap(), vec![("a".to_string(), id, "to a".to_string())]);
    /// set.shutdown(Duration::from_secs(5)).await;
    /// # drop(set);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_recovered(mut self, seen: impl Fn(&str, u64, &J) + Send + Sync + 'static) -> Self {
        self.on_recovered = Some(Box::new(seen));
        self
    }
}

impl<J> Destinations<J> {
    /// The journal the set records its jobs in, if it has one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &Vec<u8>, _| async { Delivery::Done })?;
    /// assert!(set.journal().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn journal(&self) -> Option<&Journal> {
        self.inner.journal.as_ref().map(|j| &j.journal)
    }
}
