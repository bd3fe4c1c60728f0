//! `PgBuckets` makes the decisions the in-memory `KeyedBuckets` makes (the
//! same operations on both, compared in real time: the server's clock is
//! not the test's, so a few ms of slack at boundaries); three runtimes
//! sharing one quota never exceed it together; drained rows are pruned by
//! admissions; fail-closed and fail-open behave as documented.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::global::{BucketError, Failure, PgBuckets};
use dripfeed::keyed::KeyedBuckets;
use dripfeed::keyed::{AdmitError, Quota};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::postgres::{PgServer, available};
use tokio::time::{Instant, sleep};

/// Seconds of clock disagreement tolerated between PostgreSQL and the test.
const SLACK: f64 = 0.010;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn same_decisions_as_keyed_buckets() {
    if !available("same_decisions_as_keyed_buckets") {
        return;
    }
    let pg = PgServer::start();
    let quota = Quota::new(10.0, 10.0).unwrap(); // 1 unit = 100 ms
    let remote = buckets(&pg, "same", quota, 1).await;
    remote.migrate().await.unwrap(); // twice is fine
    let local = KeyedBuckets::new(1000, quota).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= quota.rate() * SLACK + 1e-9;

    // Admit, refuse with the exact wait, check without writing.
    let a = remote.try_admit("k", 6.0).await.unwrap();
    let b = local.try_admit_at(&"k", 6.0, Instant::now()).unwrap();
    assert!(close(a.debt(), b.debt()) && a.size() == b.size());
    let r = remote.try_admit("k", 5.0).await.unwrap_err();
    let l = local.try_admit_at(&"k", 5.0, Instant::now()).unwrap_err();
    let (AdmitError::OverQuota(lo), Some(rw)) = (l, over(&r)) else {
        panic!("both refuse: {r:?} {l:?}");
    };
    assert!(
        rw.abs_diff(lo.retry_after()) <= Duration::from_secs_f64(SLACK),
        "{rw:?} {:?}",
        lo.retry_after()
    );
    assert!(remote.can_admit("k", 4.0).await.is_ok());
    assert!(local.can_admit(&"k", 4.0).is_ok());
    assert!(remote.can_admit("quiet", 10.0).await.is_ok());
    assert_eq!(remote.rows().await.unwrap(), 1, "can_admit wrote nothing");
    assert!(
        close(remote.debt("k").await.unwrap(), local.debt(&"k")),
        "check wrote nothing"
    );

    // Invalid costs are errors on both, before any round trip.
    for cost in [11.0, 0.0, -1.0, f64::NAN, f64::INFINITY] {
        let r = remote.try_admit("k", cost).await.unwrap_err();
        let l = local.try_admit(&"k", cost).unwrap_err();
        assert_eq!(
            std::mem::discriminant(r.as_admit().unwrap()),
            std::mem::discriminant(&l),
            "cost {cost}"
        );
    }

    // Lazy drain, then settle a refund and a surcharge.
    sleep(Duration::from_millis(300)).await;
    assert!(close(remote.debt("k").await.unwrap(), local.debt(&"k")));
    let r = remote.try_admit("k", 5.5).await.unwrap();
    let l = local.try_admit(&"k", 5.5).unwrap();
    assert!(close(r.debt(), l.debt()));
    let r = remote.settle("k", 5.5, 1.0).await.unwrap();
    let l = local.settle(&"k", 5.5, 1.0).unwrap();
    assert!(close(r, l), "{r} {l}");
    let r = remote.settle("k", 1.0, 30.0).await.unwrap();
    let l = local.settle(&"k", 1.0, 30.0).unwrap();
    assert!(close(r, l) && r > quota.size(), "{r} {l}");
    assert!(remote.settle("k", 1.0, -1.0).await.is_err());
    assert!(over(&remote.try_admit("k", 1.0).await.unwrap_err()).unwrap() > Duration::from_secs(2));

    // A quota per key.
    let vip = Quota::new(100.0, 1.0).unwrap();
    remote.set_quota("vip", vip);
    local.set_quota("vip", vip).unwrap();
    assert!(remote.try_admit("vip", 60.0).await.is_ok());
    assert!(local.try_admit(&"vip", 60.0).is_ok());
    assert!(over(&remote.try_admit("vip", 50.0).await.unwrap_err()).is_some());
    assert!(local.try_admit(&"vip", 50.0).is_err());
}

/// The per-key model test: random admit / settle / can_admit / time steps
/// on both, compared; disagreements only near a boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn random_operations_agree_and_drained_rows_are_pruned() {
    if !available("random_operations_agree_and_drained_rows_are_pruned") {
        return;
    }
    let pg = PgServer::start();
    let quota = Quota::new(8.0, 40.0).unwrap();
    let remote = buckets(&pg, "model", quota, 1).await.prune_every(16, 100);
    let local = KeyedBuckets::new(1000, quota).unwrap();
    let mut rng = fastrand::Rng::with_seed(11);
    let keys = ["a", "b", "c"];
    let margin = quota.rate() * SLACK * 2.0;
    let (mut agreed, mut boundary) = (0, 0);
    for _ in 0..300 {
        let key = keys[rng.usize(..keys.len())];
        let cost = 0.5 + rng.f64() * 4.0;
        let before = local.debt(&key);
        let near = |debt: f64| (debt + cost - quota.size()).abs() <= margin;
        match rng.u8(0..10) {
            0 => {
                let actual = rng.f64() * 3.0;
                let r = remote.settle(key, cost.min(2.0), actual).await.unwrap();
                let l = local.settle(&key, cost.min(2.0), actual).unwrap();
                assert!((r - l).abs() <= margin, "settle {r} vs {l}");
            }
            1 => {
                let r = remote.can_admit(key, cost).await.is_ok();
                let now = Instant::now();
                let l = local.can_admit_at(&key, cost, now).is_ok();
                assert!(r == l || near(before) || near(local.debt_at(&key, now)));
            }
            _ => {
                let remote_ok = remote.try_admit(key, cost).await.is_ok();
                let now = Instant::now();
                let is_near = near(before) || near(local.debt_at(&key, now));
                let local_ok = local.try_admit_at(&key, cost, now).is_ok();
                if remote_ok == local_ok {
                    agreed += 1;
                } else {
                    assert!(
                        is_near,
                        "disagreement away from a boundary: cost {cost}, debt {before}"
                    );
                    boundary += 1;
                    // Follow PostgreSQL so both hold the same state again.
                    if remote_ok {
                        local.settle_at(&key, 0.0, cost, now).unwrap();
                    } else {
                        local.settle_at(&key, cost, 0.0, now).unwrap();
                    }
                }
            }
        }
        let r = remote.debt(key).await.unwrap();
        let l = local.debt(&key);
        assert!((r - l).abs() <= margin, "debt {r} vs {l}");
        sleep(Duration::from_millis(rng.u64(0..15))).await;
    }
    eprintln!("model: {agreed} admissions agreed, {boundary} at a boundary");
    assert!(agreed >= 200, "{agreed}");
    assert!(boundary <= 10, "{boundary}");

    // Drained rows go: 40 idle keys, then admissions on one key prune them.
    // They are written through a second handle whose quota drains a unit in
    // 0.5 s, so no prune can take one before they are counted (at 40/s they
    // would drain in 25 ms, faster than a loaded machine writes 40 rows).
    let filler = buckets(&pg, "model", Quota::new(8.0, 2.0).unwrap(), 1).await;
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
    assert!(remote.pruned() >= 43, "pruned {}", remote.pruned());
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
    let quota = Quota::new(20.0, 100.0).unwrap();
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

/// The store's failures, counted and published like the Redis backend's:
/// errors counted and the fallback gauge, both since the last snapshot (the
/// debugging recorder resets them on each).
fn global_metrics(recorder: &DebuggingRecorder, table: &str) -> (u64, Option<f64>) {
    let (mut errors, mut fallback) = (0, None);
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let ours = key
            .key()
            .labels()
            .any(|l| l.key() == "throttle" && l.value() == table);
        match (key.key().name(), value) {
            (dripfeed::metrics::GLOBAL_ERRORS, DebugValue::Counter(n)) if ours => errors += n,
            (dripfeed::metrics::GLOBAL_FALLBACK, DebugValue::Gauge(g)) if ours => {
                fallback = Some(g.into_inner())
            }
            _ => {}
        }
    }
    (errors, fallback)
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
            let quota = Quota::new(5.0, 1.0).unwrap();
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
            assert!(matches!(e, BucketError::Postgres(_)), "{e}");
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
