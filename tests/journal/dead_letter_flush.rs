//! A dead-letter sink that cannot store what it took: the job's journal
//! record is not ended while its flush fails (a restart recovers it), and
//! is ended once a flush succeeds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use dripfeed::destinations::Destinations;
use dripfeed::journal::Journal;
use dripfeed::{DeadLetterReason, DeadLetterSink, Delivery, FlushError, Outcome, Throttle};
use tokio::sync::Notify;

use super::{fresh_dir, snapshot};

/// A sink that takes every job and whose flush fails while `failing`.
#[derive(Default)]
struct Flaky {
    failing: AtomicBool,
    flushes: AtomicU32,
    flushed: Notify,
}

impl Flaky {
    /// Waits (at most 10 s) until `n` flushes were tried.
    async fn tried(&self, n: u32) {
        let enough = || self.flushes.load(Ordering::SeqCst) >= n;
        assert!(
            crate::support::until(&self.flushed, Duration::from_secs(10), enough).await,
            "{} flushes, expected {n}",
            self.flushes.load(Ordering::SeqCst)
        );
    }
}

/// The throttle's handle on a [`Flaky`] sink.
struct Sink(Arc<Flaky>);

#[async_trait::async_trait]
impl DeadLetterSink<String> for Sink {
    fn try_offer(&self, _job: String, _why: DeadLetterReason) -> Result<(), String> {
        Ok(())
    }

    async fn flush(&self) -> Result<(), FlushError> {
        let failing = self.0.failing.load(Ordering::SeqCst);
        self.0.flushes.fetch_add(1, Ordering::SeqCst);
        self.0.flushed.notify_waiters();
        if failing {
            Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full").into())
        } else {
            Ok(())
        }
    }
}

/// Live jobs in the journal once what was sent is written.
async fn live(journal: &Journal) -> u64 {
    journal.flush().await;
    journal.stats().live
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_the_sink_cannot_store_stays_in_the_journal_until_it_can() {
    let dir = fresh_dir("dead-flaky");
    let sink = Arc::new(Flaky::default());
    sink.failing.store(true, Ordering::SeqCst);
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .dead_letter(Sink(sink.clone()))
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Failed })
        .unwrap();
    let id = throttle.submit("doomed".to_string()).await.unwrap().id();
    let journal = throttle.journal().unwrap().clone();
    // Failed, then tried again after a backoff: still failing.
    sink.tried(3).await;
    assert_eq!(live(&journal).await, 1, "not ended while the flush fails");
    let crashed = snapshot(&dir, "dead-flaky-copy");
    let found = Journal::open(&crashed).unwrap().take_recovered();
    assert_eq!(found.len(), 1, "a restart now recovers it");
    assert_eq!((found[0].id, &found[0].job[..]), (id, &b"doomed"[..]));

    // The sink works again: the next try ends it.
    sink.failing.store(false, Ordering::SeqCst);
    let tried = sink.flushes.load(Ordering::SeqCst);
    sink.tried(tried + 1).await;
    let mut left = live(&journal).await;
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = live(&journal).await;
    }
    assert_eq!(left, 0, "ended once a flush succeeded");
    let crashed = snapshot(&dir, "dead-flaky-copy");
    assert_eq!(Journal::open(&crashed).unwrap().recovered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_that_fails_at_shutdown_leaves_the_job_for_the_next_start() {
    let dir = fresh_dir("dead-down");
    let sink = Arc::new(Flaky::default());
    sink.failing.store(true, Ordering::SeqCst);
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .dead_letter(Sink(sink.clone()))
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Failed })
        .unwrap();
    let id = throttle.submit("doomed".to_string()).await.unwrap().id();
    sink.tried(1).await;
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(
        report.stats.outcome(Outcome::DeadLettered),
        1,
        "counted once"
    );
    drop(throttle);
    drain.join().await;
    let found = Journal::open(&dir).unwrap().take_recovered();
    assert_eq!(found.iter().map(|r| r.id).collect::<Vec<_>>(), [id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_keeps_its_throttle_until_its_dead_letters_are_stored() {
    let dir = fresh_dir("dead-idle");
    let sink = Arc::new(Flaky::default());
    sink.failing.store(true, Ordering::SeqCst);
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(100.0)
            .dead_letter(Sink(sink.clone())),
    )
    .idle_after(Duration::from_millis(50))
    .journal(Journal::open(&dir).unwrap())
    .build(|_: &str| |_: &String, _| async { Delivery::Failed })
    .unwrap();
    set.try_submit("a", "doomed".to_string()).unwrap();
    let journal = set.journal().unwrap().clone();
    // Dead-lettered, its line not stored: tried again and again, well past
    // idle_after, the destination keeps its throttle (handed back, the
    // record would stay in the journal while the sink may still write the
    // line: delivered again at the next start, beside it).
    sink.tried(4).await;
    assert!(
        set.stats("a").unwrap().is_active(),
        "kept while its end waits"
    );
    assert_eq!(live(&journal).await, 1);

    // The sink stores it: the record ends, then the destination goes idle.
    sink.failing.store(false, Ordering::SeqCst);
    let mut idle = false;
    for _ in 0..1000 {
        if live(&journal).await == 0 && !set.stats("a").unwrap().is_active() {
            idle = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(idle, "ended, then handed back");
    set.shutdown(Duration::ZERO).await;
    let crashed = snapshot(&dir, "dead-idle-copy");
    assert_eq!(Journal::open(&crashed).unwrap().recovered(), 0);
}
