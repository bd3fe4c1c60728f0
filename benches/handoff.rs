//! Hand-off: jobs per second from producer tasks awaiting a bounded queue
//! to one consumer that only counts, dripfeed beside a bare tokio `mpsc`,
//! governor and throttle-net in front of the same `mpsc`.
//!
//! - `dripfeed`: a `Throttle<u64>` of capacity 1,024 draining at 1e9/s
//!   (far above what a run reaches), its downstream counts; producers
//!   `submit(job).await`.
//! - `mpsc`: a bounded `tokio::sync::mpsc` of 1,024; producers
//!   `send(job).await`, one consumer task counts.
//! - `governor+mpsc`: each job passes a direct limiter's `check()` (a quota
//!   it never reaches) before `send`.
//! - `throttle-net+mpsc`: each job awaits throttle-net's `acquire()` (a
//!   quota it never reaches) before `send`.
//!
//! From 1 and from 8 producers on a two-worker runtime; each run moves
//! `JOBS` jobs and is timed from the producers' start to the consumer's
//! count of the last one. The contenders take turns within each round (the
//! first one rotates); a ratio is dripfeed's jobs per second over mpsc's in
//! the same round, and the table gives the median of the rounds and their
//! spread.
//!
//! ```sh
//! cargo bench --bench handoff -- --rounds 5
//! ```

#[path = "common/rounds.rs"]
mod rounds;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dripfeed::{Delivery, Throttle};
use tokio::sync::Notify;

const JOBS: u64 = 2_000_000;
const CAPACITY: usize = 1024;

/// Counts jobs; wakes the timer at the last one.
struct Count {
    seen: AtomicU64,
    all: Notify,
}

impl Count {
    fn new() -> Arc<Self> {
        Arc::new(Count {
            seen: AtomicU64::new(0),
            all: Notify::new(),
        })
    }

    fn one(&self) {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == JOBS {
            self.all.notify_one();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Dripfeed,
    Mpsc,
    Governor,
    ThrottleNet,
}

const ALL: [Who; 4] = [Who::Dripfeed, Who::Mpsc, Who::Governor, Who::ThrottleNet];

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Dripfeed => "dripfeed submit",
            Who::Mpsc => "tokio mpsc",
            Who::Governor => "governor check + mpsc",
            Who::ThrottleNet => "throttle-net acquire + mpsc",
        }
    }
}

/// Jobs per second through dripfeed from `producers` tasks.
async fn dripfeed(producers: u64) -> f64 {
    let count = Count::new();
    let seen = count.clone();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1e9)
        .capacity(CAPACITY)
        .build(move |_: &u64, _| {
            seen.one();
            std::future::ready(Delivery::Done)
        })
        .expect("throttle");
    let per = JOBS / producers;
    let start = Instant::now();
    for p in 0..producers {
        let t = throttle.clone();
        tokio::spawn(async move {
            for job in p * per..(p + 1) * per {
                let _ = t.submit(job).await;
            }
        });
    }
    count.all.notified().await;
    let rate = JOBS as f64 / start.elapsed().as_secs_f64();
    let report = throttle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.delivered(), JOBS);
    rate
}

/// Jobs per second through a bounded mpsc from `producers` tasks, each job
/// first passing `gate` (awaited).
async fn mpsc<G, F>(producers: u64, gate: G) -> f64
where
    G: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let count = Count::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(CAPACITY);
    let seen = count.clone();
    let consumer = tokio::spawn(async move {
        while let Some(job) = rx.recv().await {
            std::hint::black_box(job);
            seen.one();
        }
    });
    let per = JOBS / producers;
    let start = Instant::now();
    for p in 0..producers {
        let (tx, gate) = (tx.clone(), gate.clone());
        tokio::spawn(async move {
            for job in p * per..(p + 1) * per {
                gate().await;
                let _ = tx.send(job).await;
            }
        });
    }
    drop(tx);
    count.all.notified().await;
    let rate = JOBS as f64 / start.elapsed().as_secs_f64();
    let _ = consumer.await;
    rate
}

async fn run(who: Who, producers: u64) -> f64 {
    match who {
        Who::Dripfeed => dripfeed(producers).await,
        Who::Mpsc => mpsc(producers, || async {}).await,
        Who::Governor => {
            let most = NonZeroU32::MAX;
            let limiter = Arc::new(governor::RateLimiter::direct(
                governor::Quota::per_second(most).allow_burst(most),
            ));
            mpsc(producers, move || {
                let ok = limiter.check().is_ok();
                async move { assert!(ok) }
            })
            .await
        }
        Who::ThrottleNet => {
            let throttle = Arc::new(
                throttle_net::Throttle::builder()
                    .per_second(u32::MAX)
                    .burst(u32::MAX)
                    .build(),
            );
            mpsc(producers, move || {
                let t = throttle.clone();
                async move { t.acquire().await.expect("acquire") }
            })
            .await
        }
    }
}

fn main() {
    let rounds = rounds::rounds(5);
    let only = std::env::var("ONLY").ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("hand-off, {JOBS} u64 jobs per run, {rounds} rounds, 2 workers");
    println!("| producers | contender | jobs/s, median (min–max) | ÷ mpsc, median (min–max) |");
    println!("|---:|---|---:|---:|");
    for producers in [1u64, 8] {
        if !rounds::wanted(&format!("{producers}p")) {
            continue;
        }
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); ALL.len()];
        for round in 0..rounds {
            for i in 0..ALL.len() {
                let k = (i + round) % ALL.len();
                // ONLY=dripfeed (a contender's first word): that one alone, for a profile.
                if only
                    .as_deref()
                    .is_some_and(|o| !ALL[k].name().starts_with(o))
                {
                    rates[k].push(f64::NAN);
                    continue;
                }
                rates[k].push(rt.block_on(run(ALL[k], producers)));
            }
        }
        let base = &rates[1];
        for (k, who) in ALL.iter().enumerate() {
            let ratios: Vec<f64> = rates[k].iter().zip(base).map(|(a, b)| a / b).collect();
            println!(
                "| {producers} | {} | {} M | {} |",
                who.name(),
                rounds::spread(&rates[k].iter().map(|r| r / 1e6).collect::<Vec<_>>(), 2),
                rounds::spread(&ratios, 2),
            );
        }
    }
}
