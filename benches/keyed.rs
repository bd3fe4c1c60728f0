//! `KeyedBuckets::try_admit` beside governor's keyed `check_key`, at 1 key
//! and at 1,000,000 live keys, on one and two threads; then bytes per key
//! for both, from the growth of resident memory while 1,000,000 keys are
//! inserted (each store is built and filled from a fresh baseline).

#[path = "common/keys.rs"]
mod keys;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use dripfeed::keyed::{KeyedBuckets, Quota};
use governor::{DefaultKeyedRateLimiter, RateLimiter};
use keys::rss;

const KEYS: u64 = 1_000_000;
/// Table bound for 1,000,000 live keys: 2^20 slots in 8 shards of 131,072,
/// so the random split of keys over shards never evicts.
const TABLE: usize = 1 << 20;

fn ours(max_keys: usize) -> KeyedBuckets<u64> {
    // Drains far faster than the bench admits: every call is an admission.
    KeyedBuckets::new(max_keys, Quota::per_second(1e9).burst(1e6).expect("quota")).expect("table")
}

fn theirs() -> DefaultKeyedRateLimiter<u64> {
    let rate = NonZeroU32::new(1_000_000_000).expect("rate");
    let burst = NonZeroU32::new(1_000_000).expect("burst");
    RateLimiter::keyed(governor::Quota::per_second(rate).allow_burst(burst))
}

/// Runs `op` over `keys` on `threads` threads, `iters` calls in all.
fn run(threads: usize, iters: u64, keys: &[u64], op: &(dyn Fn(&u64) + Sync)) -> Duration {
    let per = iters / threads as u64;
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let barrier = &barrier;
            s.spawn(move || {
                let mut i = t * keys.len() / threads;
                barrier.wait();
                for _ in 0..per {
                    op(&keys[i]);
                    i += 1;
                    if i == keys.len() {
                        i = 0;
                    }
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // Leaving the scope joins every thread.
        start
    })
    .elapsed()
}

fn pair(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    keys: &[u64],
    live: bool,
) {
    let table = ours(if live { TABLE } else { 1024 });
    let limiter = theirs();
    if live {
        // Insert in key order, measure in shuffled order: neither store is
        // then walked in the order it was filled.
        for k in 0..KEYS {
            let k = &k;
            let _ = table.try_admit(k, 1.0);
            let _ = limiter.check_key(k);
        }
        assert_eq!((table.len(), table.evictions()), (KEYS as usize, 0));
        assert_eq!(limiter.len(), KEYS as usize);
    }
    group.bench_function(format!("dripfeed/{name}"), |b| {
        b.iter_custom(|iters| {
            run(threads, iters, keys, &|k| {
                let _ = black_box(table.try_admit(k, 1.0));
            })
        })
    });
    group.bench_function(format!("governor/{name}"), |b| {
        b.iter_custom(|iters| {
            run(threads, iters, keys, &|k| {
                let _ = black_box(limiter.check_key(k));
            })
        })
    });
}

fn bytes_per_key() {
    let keys = keys::shuffled(KEYS as usize);
    let base = rss();
    let table = ours(TABLE);
    for k in &keys {
        // Every key once: `try_admit` stores a bucket per new key.
        let _ = table.try_admit(k, 1.0);
    }
    let used = rss() - base;
    let per = used as f64 / KEYS as f64 - 8.0;
    println!("memory dripfeed: {used} B for {KEYS} keys = {per:.1} B/key beyond the 8-byte key");
    println!("  (reserved_bytes() = {} B)", table.reserved_bytes());
    drop(table);

    let base = rss();
    let limiter = theirs();
    for k in &keys {
        let _ = limiter.check_key(k);
    }
    let used = rss() - base;
    let per = used as f64 / KEYS as f64 - 8.0;
    println!("memory governor: {used} B for {KEYS} keys = {per:.1} B/key beyond the 8-byte key");
}

fn main() {
    bytes_per_key();
    let keys = keys::shuffled(KEYS as usize);
    let one = [42u64];
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
        .configure_from_args();
    let mut group = c.benchmark_group("keyed");
    pair(&mut group, "1key/1thread", 1, &one, false);
    pair(&mut group, "1key/2threads", 2, &one, false);
    pair(&mut group, "1M/1thread", 1, &keys, true);
    pair(&mut group, "1M/2threads", 2, &keys, true);
    group.finish();
    c.final_summary();
}
