//! Fair delivery across keys (`DeliveryOrder::RoundRobinByKey`): a cold
//! key's job goes out within one round of the active keys behind a hot
//! key's 10,000 queued jobs (FIFO makes it wait for all of them); the jobs
//! the drain holds per key still count against the queue's bound; and a
//! shutdown hands every one of them back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::{Delivery, DeliveryOrder, Reason, Submission, Throttle};

type Log = Arc<Mutex<Vec<String>>>;

fn throttle(
    order: DeliveryOrder,
    capacity: usize,
) -> (Throttle<String>, dripfeed::Drain<String>, Log) {
    let log: Log = Arc::default();
    let seen = log.clone();
    let (throttle, drain) = Throttle::builder()
        .shutdown_grace(Duration::ZERO)
        .drain_rate(1_000.0)
        .capacity(capacity)
        .per_key(1_000, Quota::per_second(1e6).burst(1e6).unwrap())
        .delivery_order(order)
        .build(move |job: &String, _| {
            seen.lock().unwrap().push(job.clone());
            async { Delivery::Done }
        })
        .unwrap();
    (throttle, drain, log)
}

fn submit(t: &Throttle<String>, key: &str, n: usize) {
    t.try_submit(Submission::new(format!("{key} {n}")).key(key, 1.0))
        .unwrap();
}

/// How many emissions after `before` the job went out (1: the next one).
fn emitted_after(log: &Log, job: &str, before: usize) -> usize {
    let log = log.lock().unwrap();
    let at = log.iter().position(|j| j == job).expect("emitted");
    at + 1 - before
}

#[tokio::test(start_paused = true)]
async fn a_cold_job_waits_one_round_behind_a_hot_backlog() {
    let (t, _drain, log) = throttle(DeliveryOrder::RoundRobinByKey, 20_000);
    for n in 0..10_000 {
        submit(&t, "hot", n);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Two keys active once it comes: out within two emissions.
    let before = log.lock().unwrap().len();
    assert!(before < 200, "the backlog is still there ({before} out)");
    submit(&t, "cold", 0);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(emitted_after(&log, "cold 0", before) <= 2);

    // Three cold keys at once behind the backlog: each within four.
    let before = log.lock().unwrap().len();
    for key in ["a", "b", "c"] {
        submit(&t, key, 0);
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    for key in ["a 0", "b 0", "c 0"] {
        assert!(emitted_after(&log, key, before) <= 4, "{key}");
    }
    // Within the hot key, first in, first out.
    let hot: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|j| j.starts_with("hot"))
        .cloned()
        .collect();
    assert!(
        hot.iter()
            .enumerate()
            .all(|(i, j)| *j == format!("hot {i}"))
    );
}

#[tokio::test(start_paused = true)]
async fn first_in_first_out_makes_it_wait_for_the_backlog() {
    let (t, _drain, log) = throttle(DeliveryOrder::Fifo, 20_000);
    for n in 0..10_000 {
        submit(&t, "hot", n);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = log.lock().unwrap().len();
    submit(&t, "cold", 0);
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(emitted_after(&log, "cold 0", before) > 9_000);
}

#[tokio::test(start_paused = true)]
async fn held_jobs_count_against_the_bound_and_come_back_at_shutdown() {
    let (t, drain, log) = throttle(DeliveryOrder::RoundRobinByKey, 100);
    // A key each (near the bound admission keeps a key to its share),
    // until the queue refuses.
    let fill = |from: usize| {
        let mut n = from;
        loop {
            let key = format!("k{n}");
            match t.try_submit(Submission::new(key.clone()).key(key.as_str(), 1.0)) {
                Ok(_) => n += 1,
                Err(e) => {
                    assert_eq!(e.reason(), Reason::Overloaded);
                    return n - from;
                }
            }
        }
    };
    let filled = fill(0);
    assert!(filled >= 95, "{filled}");
    // The drain takes them all into its keys' queues at its first turn:
    // they keep their places.
    tokio::time::sleep(Duration::from_micros(1500)).await;
    let out = log.lock().unwrap().len();
    assert!((1..10).contains(&out), "{out} out");
    assert_eq!(t.depth(), filled - out);
    // Room for as many as went out, no more.
    assert_eq!(fill(1_000), out);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let report = t.shutdown(Duration::ZERO).await;
    drop(t);
    drain.join().await;
    let delivered = log.lock().unwrap().len();
    assert!(!report.returned.is_empty());
    assert_eq!(
        delivered + report.returned.len(),
        filled + out,
        "every job in one place"
    );
    assert_eq!(report.stats.delivered() as usize, delivered);
}

#[tokio::test(start_paused = true)]
async fn slots_cannot_take_round_robin() {
    let built = dripfeed::Slots::builder()
        .drain_rate(10.0)
        .delivery_order(DeliveryOrder::RoundRobinByKey)
        .build_slots();
    assert!(
        matches!(built, Err(dripfeed::BuildError::Incompatible { .. })),
        "a waiter held per key could not be withdrawn"
    );
}
