//! Retries show in Prometheus: `leaky_bucket_retries_total` counts every
//! delivery given another attempt, `leaky_bucket_retry_wait` the jobs
//! waiting outside the ring for it, both equal to `stats()`.

use std::time::Duration;

use dripfeed::{Attempt, Delivery, RetryPolicy, Throttle};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::sleep;

/// The counter and the gauge, from one snapshot.
fn read(recorder: &DebuggingRecorder) -> (u64, f64) {
    let (mut retries, mut waiting) = (0, f64::NAN);
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        match (key.key().name(), value) {
            (dripfeed::metrics::RETRIES, DebugValue::Counter(n)) => retries += n,
            (dripfeed::metrics::RETRY_WAIT, DebugValue::Gauge(g)) => waiting = g.into_inner(),
            _ => {}
        }
    }
    (retries, waiting)
}

#[tokio::test(start_paused = true)]
async fn retries_and_the_jobs_waiting_for_them_are_published() {
    let recorder = DebuggingRecorder::new();
    let (throttle, _drain) = metrics::with_local_recorder(&recorder, || {
        Throttle::builder()
            .name("retrying")
            .drain_rate(1000.0)
            .retries(RetryPolicy::new(3))
            // Two refusals each, asking for 10 s: then delivered.
            .build(|_: &u32, a: Attempt| async move {
                match a.number() {
                    1 | 2 => Delivery::Retry {
                        after: Some(Duration::from_secs(10)),
                    },
                    _ => Delivery::Done,
                }
            })
    })
    .unwrap();
    for job in 0..5 {
        throttle.try_submit(job).unwrap();
    }
    sleep(Duration::from_secs(1)).await;
    let stats = throttle.stats();
    assert_eq!((stats.retried(), stats.retry_wait()), (5, 5));
    assert_eq!(read(&recorder), (5, 5.0), "metrics equal stats()");

    sleep(Duration::from_secs(30)).await;
    let stats = throttle.stats();
    assert_eq!(
        (stats.delivered(), stats.retried(), stats.retry_wait()),
        (5, 10, 0)
    );
    assert_eq!(
        read(&recorder),
        (5, 0.0),
        "5 more since the last snapshot, none waiting"
    );
}
