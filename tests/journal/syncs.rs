//! The journal's group commits, counted where Prometheus reads them:
//! `leaky_bucket_journal_syncs_total` moves with `JournalStats::fsyncs`,
//! one per batch that holds a durable admission, so its rate beside the
//! admissions' says how many share each `fsync`.

use std::time::Duration;

use dripfeed::journal::Journal;
use dripfeed::{Delivery, Throttle};
use metrics_util::debugging::DebuggingRecorder;

use super::fresh_dir;

const SYNCS: &str = "leaky_bucket_journal_syncs_total{}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_commit_is_counted_in_the_stats_and_the_metric() {
    let dir = fresh_dir("syncs");
    let recorder = DebuggingRecorder::new();
    let journal = metrics::with_local_recorder(&recorder, || Journal::open(&dir)).unwrap();
    let syncs = || {
        crate::support::counters(&recorder)
            .get(SYNCS)
            .copied()
            .unwrap_or(0)
    };
    let at_open = journal.stats().fsyncs;
    assert_eq!(syncs(), at_open, "counted from the first");
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(64)
        .journal(journal.clone())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    // One at a time: each admission waits for its own fsync.
    for n in 0..10 {
        throttle.submit(format!("job-{n}")).await.unwrap();
    }
    let one_by_one = journal.stats().fsyncs - at_open;
    assert!(
        one_by_one >= 10,
        "{one_by_one} fsyncs for 10 awaited in turn"
    );
    // Forty at once: they share commits.
    let together: Vec<_> = (10..50)
        .map(|n| throttle.submit(format!("job-{n}")))
        .collect();
    for admitted in futures_util::future::join_all(together).await {
        admitted.unwrap();
    }
    let shared = journal.stats().fsyncs - at_open - one_by_one;
    assert!(
        (1..40).contains(&shared),
        "{shared} fsyncs for 40 submitted at once"
    );
    assert_eq!(syncs(), journal.stats().fsyncs, "the metric is the stats'");
    throttle.shutdown(Duration::ZERO).await;
    drop(throttle);
    drain.join().await;
}
