//! The journal's group commits, counted where Prometheus reads them:
//! `leaky_bucket_journal_syncs_total` moves with `JournalStats::fsyncs`,
//! one per batch that holds a durable admission, so the admissions' rate
//! over its rate says how many share each `fsync`.

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
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(512)
        .journal(journal.clone())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    // (The first admission's batch may carry the writer's own records.)
    throttle.submit("first".to_owned()).await.unwrap();
    let opened = journal.stats();
    // One at a time: each admission waits for its own fsync.
    for n in 0..10 {
        throttle.submit(format!("job-{n}")).await.unwrap();
    }
    let alone = journal.stats();
    let one_by_one = alone.fsyncs - opened.fsyncs;
    assert_eq!(one_by_one, 10, "an fsync for each awaited in turn");
    // Three hundred at once: each batch the writer takes is one commit,
    // and they share them.
    let together: Vec<_> = (10..310)
        .map(|n| throttle.submit(format!("job-{n}")))
        .collect();
    for admitted in futures_util::future::join_all(together).await {
        admitted.unwrap();
    }
    let after = journal.stats();
    let shared = after.fsyncs - alone.fsyncs;
    assert_eq!(
        shared,
        after.batches - alone.batches,
        "one fsync per batch of admissions"
    );
    assert!(
        (1..300).contains(&shared),
        "{shared} fsyncs for 300 submitted at once"
    );
    // The metric, read once (a snapshot resets the recorder's counters).
    let counted = crate::support::counters(&recorder)
        .get(SYNCS)
        .copied()
        .unwrap_or(0);
    assert_eq!(counted, after.fsyncs, "the metric is the stats'");
    throttle.shutdown(Duration::ZERO).await;
    drop(throttle);
    drain.join().await;
}
