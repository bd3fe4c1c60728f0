//! What the throttle options of "What throttle users reach for" cost, each
//! beside the default in the same run, rounds alternating, medians of the
//! same-round ratios:
//!
//! - **delivery order**: one producer `submit`s 200,000 keyed jobs (64 keys
//!   in turn) through a throttle drained at 1e8/s (capacity 4,096) to a
//!   no-op downstream, FIFO beside `DeliveryOrder::RoundRobinByKey`;
//! - **cost at the drain**: the same, unkeyed, without and with
//!   `cost_by(|_| 1)` (the function called at each emission);
//! - **several limits**: 1,000,000 `try_admit`s over 100,000 keys through
//!   one `KeyedBuckets` as a `BucketStore`, beside `AllOf` of two.
//!
//! Run: `cargo run --release --example drain_options [ROUNDS]` (5 unless told).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dripfeed::keyed::{AllOf, BucketStore, KeyedBuckets, Quota};
use dripfeed::{Delivery, DeliveryOrder, Submission, Throttle};
use tokio::sync::Notify;

const JOBS: u64 = 200_000;
const KEYS: u64 = 64;

/// Seconds to move `JOBS` through a throttle `order`ed, `costed` or not.
async fn pipeline(order: DeliveryOrder, keyed: bool, costed: bool) -> f64 {
    let seen = Arc::new(AtomicU64::new(0));
    let all = Arc::new(Notify::new());
    let (s, a) = (seen.clone(), all.clone());
    let mut builder = Throttle::builder()
        .drain_rate(1e8)
        .capacity(4_096)
        .max_in_flight(1_024)
        .delivery_order(order);
    if keyed {
        builder = builder.per_key(1_024, Quota::per_second(1e12).burst(1e12).expect("a quota"));
    }
    if costed {
        builder = builder.cost_by(|_: &u64| 1);
    }
    let (throttle, _drain) = builder
        .build(move |_: &u64, _| {
            if s.fetch_add(1, Ordering::Relaxed) + 1 == JOBS {
                a.notify_one();
            }
            async { Delivery::Done }
        })
        .expect("a throttle");
    let names: Vec<String> = (0..KEYS).map(|k| format!("tenant-{k}")).collect();
    let start = Instant::now();
    let done = all.notified();
    tokio::pin!(done);
    done.as_mut().enable();
    for n in 0..JOBS {
        let job = match keyed {
            true => Submission::new(n).key(names[(n % KEYS) as usize].as_str(), 1.0),
            false => Submission::new(n),
        };
        if throttle.submit(job).await.is_err() {
            panic!("refused");
        }
    }
    done.await;
    let secs = start.elapsed().as_secs_f64();
    throttle.shutdown(Duration::ZERO).await;
    secs
}

/// Seconds for 1,000,000 admissions over 100,000 keys through `store`.
async fn checks(store: &dyn BucketStore, keys: &[String]) -> f64 {
    let start = Instant::now();
    for i in 0..1_000_000usize {
        let _ = std::hint::black_box(store.try_admit(&keys[(i * 7_919) % keys.len()], 1.0).await);
    }
    start.elapsed().as_secs_f64()
}

fn table() -> Arc<dyn BucketStore> {
    let quota = Quota::per_second(10.0).burst(100.0).expect("a quota");
    Arc::new(KeyedBuckets::<String>::new(1 << 17, quota).expect("a table"))
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let keys: Vec<String> = (0..100_000).map(|k| format!("key-{k}")).collect();
    let (mut order, mut cost, mut limits) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        rt.block_on(async {
            let fifo = pipeline(DeliveryOrder::Fifo, true, false).await;
            let fair = pipeline(DeliveryOrder::RoundRobinByKey, true, false).await;
            let plain = pipeline(DeliveryOrder::Fifo, false, false).await;
            let costed = pipeline(DeliveryOrder::Fifo, false, true).await;
            let one = table();
            let two = AllOf::new(table()).and(table());
            let single = checks(one.as_ref(), &keys).await;
            let both = checks(&two, &keys).await;
            println!(
                "round {round}: keyed FIFO {:.0}/s, round-robin {:.0}/s; unkeyed {:.0}/s, cost_by {:.0}/s; one limit {:.0} ns/check, two {:.0} ns/check",
                JOBS as f64 / fifo,
                JOBS as f64 / fair,
                JOBS as f64 / plain,
                JOBS as f64 / costed,
                single * 1e3,
                both * 1e3,
            );
            order.push(fifo / fair);
            cost.push(plain / costed);
            limits.push(both / single);
        });
    }
    let show = |what: &str, v: Vec<f64>| {
        let (m, lo, hi) = median(v);
        println!("{what}: {m:.2} (rounds {lo:.2}–{hi:.2})");
    };
    show("round-robin jobs/s ÷ FIFO jobs/s", order);
    show("cost_by jobs/s ÷ default jobs/s", cost);
    show("AllOf of two: time per check ÷ one store's", limits);
}
