//! A queued job is never stranded with the drain asleep. The drain sleeps
//! whenever the queue runs dry and is woken only on the empty→non-empty
//! edge; here producers on other threads submit tiny bursts with random
//! pauses, racing that edge (two producers at once, per-key refusals that
//! give a reservation back), and every admitted job must be delivered.
//! Real threads, no sleeps: a bound on the total wait, not a timing.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::{Attempt, Delivery, Throttle};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_job_is_emitted_across_idle_edges() {
    // Distinct job ids delivered, and deliveries of an id already seen.
    let ids = Arc::new(Mutex::new((HashSet::new(), 0u64)));
    let all_in = Arc::new(Notify::new());
    let (d, n) = (ids.clone(), all_in.clone());
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1_000_000.0)
        .capacity(64)
        .per_key(16, Quota::per_second(1e6).burst(2.0).unwrap())
        .build(move |_: &u64, attempt: Attempt| {
            let mut seen = d.lock().unwrap();
            if !seen.0.insert(attempt.id()) {
                seen.1 += 1;
            }
            n.notify_one();
            async { Delivery::Done }
        })
        .unwrap();
    let admitted = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..3u64)
        .map(|p| {
            let (t, admitted) = (throttle.clone(), admitted.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(p);
                for i in 0..4_000u64 {
                    for _ in 0..rng.usize(1..3) {
                        let ok = if rng.u8(0..4) == 0 {
                            // cost 3 > size 2: refused by its key
                            t.try_submit(
                                dripfeed::Submission::new(i)
                                    .key(i % 5, if rng.bool() { 1.0 } else { 3.0 }),
                            )
                            .is_ok()
                        } else {
                            t.try_submit(i).is_ok()
                        };
                        if ok {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // let the drain run dry now and then
                    for _ in 0..rng.usize(0..200) {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let want = admitted.load(Ordering::Relaxed);
    assert!(want > 6_000, "{want}");
    let distinct = || ids.lock().unwrap().0.len() as u64;
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let notified = all_in.notified();
            if distinct() >= want {
                break;
            }
            notified.await;
        }
    })
    .await;
    assert!(done.is_ok(), "stranded: {} of {want} delivered", distinct());
    assert_eq!(distinct(), want, "every admitted job, by its id");
    assert_eq!(ids.lock().unwrap().1, 0, "no job delivered twice");
    assert_eq!(throttle.depth(), 0);
}
