//! `PgBuckets` beyond the shared conformance suite (`bucket_stores.rs`):
//! three runtimes sharing one quota never exceed it together; drained rows
//! are pruned by admissions; fail-closed and fail-open behave as documented.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::global::{Failure, PgBuckets};
use dripfeed::keyed::{AdmitError, BucketError, BucketStore, Quota};
use metrics_util::debugging::DebuggingRecorder;
use support::global_metrics;
use support::postgres::{PgServer, available};
use tokio::time::{Instant, sleep};

fn over(e: &BucketError) -> Option<Duration> {
    match e.as_admit() {
        Some(AdmitError::OverQuota(o)) => Some(o.retry_after()),
        _ => None,
    }
}

async fn buckets(pg: &PgServer, table: &str, quota: Quota, pool: usize) -> PgBuckets {
    let pool = PgBuckets::pool(&pg.url(), pool).unwrap();
    let b = PgBuckets::new(pool, table, quota)
        .unwrap()
        .call_timeout(Duration::from_secs(2));
    b.migrate().await.unwrap();
    b
}

/// Admissions prune drained rows on their own, a batch every `prune_every`.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn drained_rows_are_pruned_by_admissions() {
    if !available("drained_rows_are_pruned_by_admissions") {
        return;
    }
    let pg = PgServer::start();
    let remote = buckets(&pg, "model", Quota::per_second(40.0).burst(8.0).unwrap(), 2).await;
    // Drained rows go: 40 idle keys, then admissions on one key prune them.
    // They are written through a second handle whose quota drains a unit in
    // 0.5 s, so no prune can take one before they are counted (at 40/s they
    // would drain in 25 ms, faster than a loaded machine writes 40 rows).
    let filler = buckets(&pg, "model", Quota::per_second(2.0).burst(8.0).unwrap(), 1).await;
    for i in 0..40 {
        filler.try_admit(&format!("idle-{i}"), 1.0).await.unwrap();
    }
    assert!(remote.rows().await.unwrap() >= 40);
    sleep(Duration::from_millis(600)).await; // 1 unit at 2/s: 500 ms
    let start = Instant::now();
    while remote.rows().await.unwrap() > 1 && start.elapsed() < Duration::from_secs(5) {
        let _ = remote.try_admit("busy", 0.5).await;
        sleep(Duration::from_millis(5)).await;
    }
    assert!(
        remote.rows().await.unwrap() <= 1,
        "pruned {}",
        remote.pruned()
    );
    assert!(remote.pruned() >= 40, "pruned {}", remote.pruned());
}

/// Three runtimes on three threads, each with its own pool, hammer one key:
/// together they never exceed `size + rate × elapsed`.
#[test]
fn three_runtimes_never_exceed_a_shared_quota() {
    if !available("three_runtimes_never_exceed_a_shared_quota") {
        return;
    }
    let pg = PgServer::start();
    let url = pg.url();
    let quota = Quota::per_second(100.0).burst(20.0).unwrap();
    let run = Duration::from_millis(1500);
    let setup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    setup.block_on(async {
        let b = PgBuckets::new(PgBuckets::pool(&url, 1).unwrap(), "shared", quota).unwrap();
        b.migrate().await.unwrap();
    });
    let admitted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (url, admitted, refused) = (url.clone(), admitted.clone(), refused.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let pool = PgBuckets::pool(&url, 2).unwrap();
                    let b = Arc::new(
                        PgBuckets::new(pool, "shared", quota)
                            .unwrap()
                            .call_timeout(Duration::from_secs(2)),
                    );
                    let tasks: Vec<_> = (0..2)
                        .map(|_| {
                            let (b, admitted, refused) =
                                (b.clone(), admitted.clone(), refused.clone());
                            tokio::spawn(async move {
                                while started.elapsed() < run {
                                    match b.try_admit("tenant", 1.0).await {
                                        Ok(_) => admitted.fetch_add(1, Ordering::Relaxed),
                                        Err(e) => {
                                            assert!(over(&e).is_some(), "{e}");
                                            refused.fetch_add(1, Ordering::Relaxed)
                                        }
                                    };
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (admitted, refused) = (
        admitted.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    let bound = quota.size() + quota.rate() * elapsed;
    eprintln!(
        "3 runtimes: {admitted} admitted, {refused} refused in {elapsed:.3} s; bound {bound:.1}"
    );
    assert!(admitted as f64 <= bound, "{admitted} > {bound}");
    assert!(refused > 0, "the quota was reached");
    assert!(
        admitted as f64 >= 0.8 * quota.rate() * run.as_secs_f64(),
        "the quota was used: {admitted}"
    );
}

#[test]
fn fail_closed_then_open_then_recover() {
    if !available("fail_closed_then_open_then_recover") {
        return;
    }
    let recorder = DebuggingRecorder::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut pg = PgServer::start();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let quota = Quota::per_second(1.0).burst(5.0).unwrap();
            let closed = buckets(&pg, "fail", quota, 2)
                .await
                .call_timeout(Duration::from_millis(300))
                .probe_interval(Duration::from_millis(500));
            let open = buckets(&pg, "fail_open", quota, 2)
                .await
                .call_timeout(Duration::from_millis(300))
                .probe_interval(Duration::from_millis(100))
                .on_failure(Failure::FailOpen { local_share: 0.5 })
                .unwrap();
            assert!(closed.try_admit("k", 5.0).await.is_ok());
            assert_eq!(global_metrics(&recorder, "fail"), (0, Some(0.0)));
            pg.stop();

            let e = closed.try_admit("k", 1.0).await.unwrap_err();
            assert!(matches!(e, BucketError::Unavailable(_)), "{e}");
            assert!(e.is_store_failure() && closed.in_fallback());
            assert_eq!(global_metrics(&recorder, "fail"), (1, Some(1.0)));
            // Within the probe interval: refused without a round trip.
            assert!(
                closed
                    .try_admit("k", 1.0)
                    .await
                    .unwrap_err()
                    .is_store_failure()
            );
            assert_eq!(global_metrics(&recorder, "fail").0, 0);
            // Fail-open: a local bucket of the same size.
            for _ in 0..5 {
                open.try_admit("k", 1.0).await.unwrap();
            }
            assert!(open.in_fallback());
            assert!(over(&open.try_admit("k", 1.0).await.unwrap_err()).is_some());
            let (errors, fallback) = global_metrics(&recorder, "fail_open");
            assert!(
                errors >= 1 && fallback == Some(1.0),
                "{errors} {fallback:?}"
            );

            pg.restart();
            let start = Instant::now();
            loop {
                if closed.try_admit("k2", 1.0).await.is_ok() {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(5), "recovered");
                sleep(Duration::from_millis(50)).await;
            }
            assert!(!closed.in_fallback());
            assert_eq!(global_metrics(&recorder, "fail").1, Some(0.0));
            // Migrating again is harmless.
            closed.migrate().await.unwrap();
        })
    });
}
