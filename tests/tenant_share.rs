//! A flooding tenant cannot crowd a polite one out of the shared queue,
//! whatever their quotas: the last quarter of the queue goes to tenants
//! below their share. In paused time, in memory and through a BucketStore.

use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
use dripfeed::{Delivery, Reason, Throttle, ThrottleBuilder};

/// Quota 200/s with a burst of 200 (above the queue), a queue of 100
/// drained at 50/s.
fn template() -> ThrottleBuilder<u32> {
    Throttle::builder().drain_rate(50.0).capacity(100)
}

fn quota() -> Quota {
    Quota::per_second(200.0).burst(200.0).unwrap()
}

/// What each tenant got over 3 s: the flooder ~10,000/s, the polite one 5/s.
struct Tally {
    flood_ok: u32,
    flood_refused: u32,
    polite_ok: u32,
    polite_refused: Vec<Reason>,
}

async fn flood<F, Fut>(submit: F) -> Tally
where
    F: Fn(&'static str, u32) -> Fut,
    Fut: std::future::Future<Output = Result<(), Reason>>,
{
    let mut t = Tally {
        flood_ok: 0,
        flood_refused: 0,
        polite_ok: 0,
        polite_refused: Vec::new(),
    };
    for tick in 0..300u32 {
        for n in 0..100 {
            match submit("flooder", tick * 100 + n).await {
                Ok(()) => t.flood_ok += 1,
                Err(_) => t.flood_refused += 1,
            }
        }
        if tick % 20 == 0 {
            match submit("polite", tick).await {
                Ok(()) => t.polite_ok += 1,
                Err(reason) => t.polite_refused.push(reason),
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t
}

fn check(t: &Tally) {
    assert_eq!(
        (t.polite_ok, &t.polite_refused[..]),
        (15, &[][..]),
        "every polite request admitted"
    );
    assert!(
        t.flood_refused > 0 && t.flood_ok > 100,
        "the flooder was held back, not shut out"
    );
}

#[tokio::test(start_paused = true)]
async fn a_polite_tenant_gets_in_beside_a_flooder_in_memory() {
    let (throttle, _drain) = template()
        .per_key(1_000, quota())
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    let t = flood(|key, job| {
        let r = throttle.try_submit(dripfeed::Submission::new(job).key(key, 1.0));
        async move { r.map(|_| ()).map_err(|e| e.reason()) }
    })
    .await;
    check(&t);
    assert!(throttle.depth() <= 100);
}

#[tokio::test(start_paused = true)]
async fn a_polite_tenant_gets_in_beside_a_flooder_through_a_store() {
    let store: Arc<dyn BucketStore> =
        Arc::new(KeyedBuckets::<String>::new(1_000, quota()).unwrap());
    let (throttle, _drain) = template()
        .key_store(store)
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    let t = flood(|key, job| {
        let throttle = throttle.clone();
        async move {
            throttle
                .submit_timeout(
                    dripfeed::Submission::new(job).key(key, 1.0),
                    std::time::Duration::ZERO,
                )
                .await
                .map(|_| ())
                .map_err(|e| e.reason())
        }
    })
    .await;
    check(&t);
}

#[tokio::test(start_paused = true)]
async fn unkeyed_jobs_still_fill_the_whole_queue() {
    let (throttle, _drain) = template()
        .per_key(1_000, quota())
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    for job in 0..100 {
        throttle.try_submit(job).unwrap();
    }
    assert_eq!(
        throttle.try_submit(100).unwrap_err().reason(),
        Reason::Overloaded
    );
}
