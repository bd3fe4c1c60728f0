//! An admission dropped half way, its caller gone (a client that hung up,
//! a request handler cancelled), leaves nothing behind: the set's place it
//! held is given back and its journal record ended, so nothing is
//! redelivered at the next start for a job that was never queued.

use std::future::Future;
use std::time::Duration;

use dripfeed::destinations::{DestinationConfig, Destinations};
use dripfeed::journal::Journal;
use dripfeed::{Delivery, Throttle};

use super::{fresh_dir, settled};

/// Polls `fut` once, then drops it: the admission is cancelled at its
/// first await (the journal's fsync), as a hung-up caller's would be.
async fn poll_once_and_drop<F: Future>(fut: F) -> bool {
    tokio::select! {
        biased;
        _ = fut => true,
        _ = std::future::ready(()) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_admission_dropped_half_way_holds_no_place_and_no_record() {
    let dir = fresh_dir("cancelled");
    let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
        .destination("a", DestinationConfig::default())
        .max_jobs(2)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &str| |_: &String, _| async { Delivery::Done })
        .unwrap();
    let mut finished = 0;
    for n in 0..20 {
        if poll_once_and_drop(set.submit_timeout(
            "a",
            format!("dropped {n}"),
            std::time::Duration::ZERO,
        ))
        .await
        {
            finished += 1;
        }
    }
    // Had a dropped admission kept its place, the set (bound 2) would refuse.
    assert!(
        finished < 2,
        "{finished} of 20 finished at their first poll"
    );
    set.submit_timeout("a", "kept".to_string(), std::time::Duration::ZERO)
        .await
        .expect("the dropped admissions gave their places back");
    let journal = set.journal().unwrap().clone();
    let stats = settled(&journal).await;
    assert!(
        stats.live as usize <= 1 + finished,
        "the dropped admissions' records ended: {stats:?}"
    );
    let _ = set.shutdown(Duration::ZERO).await;
    drop((set, journal));
    let reopened = Journal::open(&dir).unwrap();
    assert!(
        reopened.recovered() <= 1 + finished,
        "{} recovered: only what was admitted comes back",
        reopened.recovered()
    );
    drop(reopened);
    let _ = std::fs::remove_dir_all(&dir);
}
