//! `RedisBuckets` beyond the shared conformance suite (`bucket_stores.rs`):
//! fail-closed and fail-open while a Redis server is down and back, with
//! the same two metrics as `PgBuckets`; overrides shared by two handles.

use crate::support;

use std::time::Duration;

use dripfeed::global::{Failure, RedisBuckets, RedisConnection};
use dripfeed::keyed::{AdmitError, BucketError, BucketStore, Quota};
use metrics_util::debugging::DebuggingRecorder;
use support::global_metrics;
use support::redis::{RedisServer, available};
use tokio::time::{Instant, sleep};

fn over(e: &BucketError) -> Option<Duration> {
    match e.as_admit() {
        Some(AdmitError::OverQuota(o)) => Some(o.retry_after()),
        _ => None,
    }
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
    let mut redis = RedisServer::start();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let quota = Quota::per_second(1.0).burst(5.0).unwrap();
            let conn = RedisConnection::open(&redis.url()).unwrap();
            let closed = RedisBuckets::new(conn.clone(), "fail", quota)
                .call_timeout(Duration::from_millis(300))
                .probe_interval(Duration::from_millis(500));
            let open = RedisBuckets::new(conn, "fail_open", quota)
                .call_timeout(Duration::from_millis(300))
                .probe_interval(Duration::from_millis(100))
                .on_failure(Failure::FailOpen { local_share: 0.5 })
                .unwrap();
            let vip = Quota::per_second(1.0).burst(8.0).unwrap();
            open.set_quota("vip", vip).await.unwrap();
            assert!(closed.try_admit("k", 5.0).await.is_ok());
            assert!(open.try_admit("vip", 1.0).await.is_ok());
            assert_eq!(global_metrics(&recorder, "fail"), (0, Some(0.0)));
            redis.kill();

            let e = closed.try_admit("k", 1.0).await.unwrap_err();
            assert!(matches!(e, BucketError::Unavailable(_)), "{e}");
            assert!(e.is_store_failure() && closed.in_fallback());
            assert_eq!(global_metrics(&recorder, "fail"), (1, Some(1.0)));
            // Within the probe interval: refused without a round trip.
            let e = closed.try_admit("k", 1.0).await.unwrap_err();
            assert!(e.is_store_failure() && over(&e).is_none(), "never a 429");
            assert_eq!(global_metrics(&recorder, "fail").0, 0);
            // Fail-open: a local bucket of the same size, the override's
            // size for the key Redis said has one.
            for _ in 0..5 {
                open.try_admit("k", 1.0).await.unwrap();
            }
            assert!(open.in_fallback());
            assert!(over(&open.try_admit("k", 1.0).await.unwrap_err()).is_some());
            for _ in 0..8 {
                open.try_admit("vip", 1.0).await.unwrap();
            }
            let (errors, fallback) = global_metrics(&recorder, "fail_open");
            assert!(
                errors >= 1 && fallback == Some(1.0),
                "{errors} {fallback:?}"
            );

            redis.restart();
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
        })
    });
}
