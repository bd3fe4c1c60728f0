//! End to end: jobs per second from producer tasks through admission, the
//! ring and the drain to a no-op async downstream, at an effectively
//! unlimited rate (drain rate 1e8/s, 1,024 deliveries in flight, capacity
//! 4,096), beside a plain tokio mpsc pipeline (bounded 4,096) whose consumer
//! task awaits the same no-op per job. Both on a multi-thread runtime with
//! two workers.
//!
//! One iteration moves `JOBS` jobs; its time runs from the producers' start
//! until the downstream has seen the last job. Building the throttle (and
//! spawning its drain) and shutting it down are outside the timed region.
//!
//! Lines (dripfeed with its default dispatch, `Dispatch::Inline`: the drain
//! polls the deliveries itself):
//! - `dripfeed-spawn/submit/1producer`: as `dripfeed/submit/1producer`, with
//!   `Dispatch::Spawn` (a task per delivery, what the first core did);
//! - `dripfeed/submit/{1,2}producers`: producers call `submit(job).await`
//!   (waits for room when the ring is full).
//! - `dripfeed/try_submit/1producer`: the producer calls `try_submit` and
//!   yields to the runtime when refused, then tries again.
//! - `mpsc/{1,2}producers`: producers `send(job).await`; one consumer task
//!   `recv()`s and awaits the no-op inline.
//! - `mpsc+spawn/1producer`: the same, but the consumer spawns a task per job
//!   for the no-op (what dripfeed's drain does, to isolate that cost).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, measurement::WallTime};
use dripfeed::{Delivery, Dispatch, Throttle};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

const JOBS: u64 = 200_000;
const CAPACITY: usize = 4096;
const IN_FLIGHT: usize = 1024;

/// Counts deliveries; wakes the timer when the last one arrives.
struct Done {
    seen: AtomicU64,
    all: Notify,
    want: u64,
}

impl Done {
    fn new(want: u64) -> Arc<Self> {
        Arc::new(Done {
            seen: AtomicU64::new(0),
            all: Notify::new(),
            want,
        })
    }

    fn one(&self) {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.want {
            self.all.notify_one();
        }
    }
}

/// The downstream's work: nothing, asynchronously.
async fn no_op(job: u64) {
    black_box(job);
}

#[derive(Clone, Copy)]
enum Mode {
    Submit,
    TrySubmit,
}

async fn dripfeed_once(producers: u64, mode: Mode, dispatch: Dispatch) -> Duration {
    let done = Done::new(JOBS);
    let seen = done.clone();
    let (throttle, drain) = Throttle::builder()
        .drain_rate(1e8)
        .capacity(CAPACITY)
        .max_in_flight(IN_FLIGHT)
        .dispatch(dispatch)
        .build(move |job: &u64, _| {
            let seen = seen.clone();
            let job = *job;
            async move {
                no_op(job).await;
                seen.one();
                Delivery::Done
            }
        })
        .expect("throttle");
    let per = JOBS / producers;
    let start = Instant::now();
    for p in 0..producers {
        let t = throttle.clone();
        tokio::spawn(async move {
            for i in p * per..(p + 1) * per {
                match mode {
                    Mode::Submit => {
                        let _ = t.submit(i).await;
                    }
                    Mode::TrySubmit => {
                        let mut job = i;
                        while let Err(refused) = t.try_submit(job) {
                            job = refused.into_job();
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }
        });
    }
    done.all.notified().await;
    let took = start.elapsed();
    let report = throttle.shutdown(Duration::from_secs(5)).await;
    drop(drain);
    assert_eq!(report.stats.delivered(), JOBS);
    took
}

async fn mpsc_once(producers: u64, spawn: bool) -> Duration {
    let done = Done::new(JOBS);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(CAPACITY);
    let seen = done.clone();
    let consumer = tokio::spawn(async move {
        while let Some(job) = rx.recv().await {
            if spawn {
                let seen = seen.clone();
                tokio::spawn(async move {
                    no_op(job).await;
                    seen.one();
                });
            } else {
                no_op(job).await;
                seen.one();
            }
        }
    });
    let per = JOBS / producers;
    let start = Instant::now();
    for p in 0..producers {
        let tx = tx.clone();
        tokio::spawn(async move {
            for i in p * per..(p + 1) * per {
                let _ = tx.send(i).await;
            }
        });
    }
    drop(tx);
    done.all.notified().await;
    let took = start.elapsed();
    let _ = consumer.await;
    took
}

fn line<F, Fut>(group: &mut BenchmarkGroup<'_, WallTime>, rt: &Runtime, name: &str, once: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += once().await;
                }
                total
            })
        })
    });
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .sample_size(20)
        .configure_from_args();
    let mut group = c.benchmark_group("end_to_end");
    group.throughput(Throughput::Elements(JOBS));
    line(&mut group, &rt, "dripfeed/submit/1producer", || {
        dripfeed_once(1, Mode::Submit, Dispatch::default())
    });
    line(&mut group, &rt, "dripfeed/try_submit/1producer", || {
        dripfeed_once(1, Mode::TrySubmit, Dispatch::default())
    });
    line(&mut group, &rt, "dripfeed/submit/2producers", || {
        dripfeed_once(2, Mode::Submit, Dispatch::default())
    });
    line(&mut group, &rt, "dripfeed-spawn/submit/1producer", || {
        dripfeed_once(1, Mode::Submit, Dispatch::Spawn)
    });
    line(&mut group, &rt, "mpsc/1producer", || mpsc_once(1, false));
    line(&mut group, &rt, "mpsc/2producers", || mpsc_once(2, false));
    line(&mut group, &rt, "mpsc+spawn/1producer", || {
        mpsc_once(1, true)
    });
    group.finish();
    c.final_summary();
}
