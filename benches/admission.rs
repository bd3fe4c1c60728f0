//! Admission cost: dripfeed's `try_submit` (accepted and refused) beside a
//! raw `crossbeam_queue::ArrayQueue`, `tokio::sync::mpsc`, governor's direct
//! `check()` and leaky-bucket's `try_acquire(1)`, on one and two threads.
//!
//! What each line measures (the book's Benchmarks page, docs/src/benchmarks.md, says the same):
//! - `dripfeed/accepted`: one accepted `try_submit` into a throttle whose
//!   drain is not running (`build_unspawned`, never polled), so nothing is
//!   popped. A fresh throttle of capacity `K` per batch of `K` submissions;
//!   building and dropping it are outside the timed region.
//! - `dripfeed/refused`: one refused `try_submit` (tail-drop, `Overloaded`,
//!   with its `Retry-After`) on a full throttle; the `Rejected` is dropped.
//! - `arrayqueue/push_pop`: a push then a pop on one queue (steady state).
//! - `arrayqueue/push`: one push into a fresh queue of `K`, batched like
//!   `dripfeed/accepted` (the like-for-like half of push+pop).
//! - `mpsc/try_send_try_recv`: `try_send` then `try_recv` on one bounded
//!   channel (steady state; one thread only: the receiver is not shared).
//! - `mpsc/try_send`: one `try_send` into a fresh channel of `K`, batched.
//! - `governor/check_ok`, `governor/check_refused`: a direct limiter's
//!   `check()` that passes (a huge quota) or fails (quota 1/hour, spent).
//! - `leaky_bucket/try_acquire_ok`, `leaky_bucket/try_acquire_refused`:
//!   `try_acquire(1)` with a huge balance, or on an empty bucket.
//!
//! On two threads every line is the wall time of both threads working on
//! one shared instance, divided by the operations of both (the inverse of
//! throughput, as in `benches/keyed.rs`).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use crossbeam_queue::ArrayQueue;
use dripfeed::{Delivery, Throttle};
use governor::{DefaultDirectRateLimiter, RateLimiter};

/// Submissions per fresh instance, per thread.
const K: usize = 4096;

fn throttle(capacity: usize) -> Throttle<u64> {
    let (throttle, drain) = Throttle::builder()
        .drain_rate(1.0)
        .capacity(capacity)
        .build_unspawned(|_: &u64, _| async { Delivery::Done })
        .expect("throttle");
    // The drain future is never polled: nothing leaves the ring.
    drop(drain);
    throttle
}

fn full_throttle() -> Throttle<u64> {
    let t = throttle(K);
    for i in 0..K as u64 {
        t.try_submit(i).expect("room");
    }
    assert!(t.try_submit(0).is_err());
    t
}

fn governor_ok() -> DefaultDirectRateLimiter {
    let rate = NonZeroU32::new(u32::MAX).expect("rate");
    RateLimiter::direct(governor::Quota::per_second(rate).allow_burst(rate))
}

fn governor_refused() -> DefaultDirectRateLimiter {
    let one = NonZeroU32::new(1).expect("one");
    let limiter = RateLimiter::direct(governor::Quota::per_hour(one));
    assert!(limiter.check().is_ok());
    assert!(limiter.check().is_err());
    limiter
}

fn leaky_ok() -> leaky_bucket::RateLimiter {
    leaky_bucket::RateLimiter::builder()
        .max(1 << 60)
        .initial(1 << 60)
        .refill(1)
        .interval(Duration::from_secs(3600))
        .build()
}

fn leaky_refused() -> leaky_bucket::RateLimiter {
    let limiter = leaky_bucket::RateLimiter::builder()
        .max(1)
        .initial(0)
        .refill(1)
        .interval(Duration::from_secs(3600))
        .build();
    assert!(!limiter.try_acquire(1));
    limiter
}

/// Runs `op(i)` `per` times on each of `threads` threads over shared state;
/// returns the wall time from the first thread's start to the last one's end.
fn threaded(threads: usize, per: u64, op: &(dyn Fn(u64) + Sync)) -> Duration {
    if threads == 1 {
        let start = Instant::now();
        for i in 0..per {
            op(i);
        }
        return start.elapsed();
    }
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..per {
                        op(i);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    let start = spans.iter().map(|s| s.0).min().expect("a thread");
    let end = spans.iter().map(|s| s.1).max().expect("a thread");
    end - start
}

/// Steady-state ops: `iters` in all, split over the threads.
fn steady(threads: usize, iters: u64, op: &(dyn Fn(u64) + Sync)) -> Duration {
    threaded(threads, iters.div_ceil(threads as u64), op)
}

/// Batched ops: a fresh instance per batch of `K` per thread; `make` and the
/// drop are not timed.
fn batched<T: Sync>(
    threads: usize,
    iters: u64,
    make: impl Fn() -> T,
    op: impl Fn(&T, u64) + Sync,
) -> Duration {
    let per_batch = (K * threads) as u64;
    let batches = iters.div_ceil(per_batch).max(1);
    let mut total = Duration::ZERO;
    for _ in 0..batches {
        let target = make();
        total += threaded(threads, K as u64, &|i| op(&target, i));
        drop(target);
    }
    // Report per operation of the `iters` criterion asked for.
    total.mul_f64(iters as f64 / (batches * per_batch) as f64)
}

fn lines(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    let tag = if threads == 1 { "1thread" } else { "2threads" };

    group.bench_function(format!("dripfeed/accepted/{tag}"), |b| {
        b.iter_custom(|iters| {
            batched(
                threads,
                iters,
                || throttle(K * threads),
                |t, i| {
                    let _ = black_box(t.try_submit(i));
                },
            )
        })
    });
    let full = full_throttle();
    group.bench_function(format!("dripfeed/refused/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|i| {
                let _ = black_box(full.try_submit(i));
            })
        })
    });
    drop(full);

    let q = ArrayQueue::new(K * threads);
    group.bench_function(format!("arrayqueue/push_pop/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|i| {
                let _ = black_box(q.push(i));
                let _ = black_box(q.pop());
            })
        })
    });
    group.bench_function(format!("arrayqueue/push/{tag}"), |b| {
        b.iter_custom(|iters| {
            batched(
                threads,
                iters,
                || ArrayQueue::new(K * threads),
                |q, i| {
                    let _ = black_box(q.push(i));
                },
            )
        })
    });

    if threads == 1 {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(K);
        group.bench_function(format!("mpsc/try_send_try_recv/{tag}"), |b| {
            b.iter(|| {
                let _ = black_box(tx.try_send(black_box(1)));
                let _ = black_box(rx.try_recv());
            })
        });
    }
    group.bench_function(format!("mpsc/try_send/{tag}"), |b| {
        b.iter_custom(|iters| {
            batched(
                threads,
                iters,
                || tokio::sync::mpsc::channel::<u64>(K * threads),
                |(tx, _rx), i| {
                    let _ = black_box(tx.try_send(i));
                },
            )
        })
    });

    let ok = governor_ok();
    group.bench_function(format!("governor/check_ok/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|_| {
                let _ = black_box(ok.check());
            })
        })
    });
    let refused = governor_refused();
    group.bench_function(format!("governor/check_refused/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|_| {
                let _ = black_box(refused.check());
            })
        })
    });

    let ok = leaky_ok();
    group.bench_function(format!("leaky_bucket/try_acquire_ok/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|_| {
                black_box(ok.try_acquire(1));
            })
        })
    });
    let refused = leaky_refused();
    group.bench_function(format!("leaky_bucket/try_acquire_refused/{tag}"), |b| {
        b.iter_custom(|iters| {
            steady(threads, iters, &|_| {
                black_box(refused.try_acquire(1));
            })
        })
    });
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    let mut group = c.benchmark_group("admission");
    lines(&mut group, 1);
    lines(&mut group, 2);
    group.finish();
    c.final_summary();
}
