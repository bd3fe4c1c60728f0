//! Per-key checks beside the peers: dripfeed's `KeyedBuckets`, governor's
//! keyed (DashMap) limiter and throttle-net's `PerKey`, each with quota
//! 10/s and burst 100 (dripfeed's table with room for every key,
//! `max_keys` 2^17). A fourth row is dripfeed's table given the time
//! (`try_admit_at`): reading the clock (`clock_gettime`, whose `rdtscp`
//! waits for the loads before it) is a large share of a check. A fifth is
//! dripfeed's table hashing with foldhash instead of its default SipHash
//! (governor's DashMap hashes with SipHash too), for keys no adversary
//! picks, and a sixth with `Prehashed`, for keys that are hashes already
//! (what a throttle's own per-key table pays).
//!
//! - *ns per check*: 100,000 distinct keys each admitted once, then
//!   1,000,000 checks cycling over them in a shuffled order, on 1 thread
//!   and from 8 threads (each starting at its own offset; the time is the
//!   wall time of all of them over the checks of all). Every check is an
//!   admission. `u64` keys and `String` keys (`"tenant-00001234"`).
//! - *bytes per key*: resident memory after filling 100,000 keys less
//!   before building the store, in a fresh process per store and key type
//!   (the bench runs itself again with `mem STORE KEY`). The keys
//!   themselves are made before the first reading.
//!
//! The contenders take turns within each round (the first one rotates);
//! each ratio is over governor's figure of the same round.
//!
//! ```sh
//! cargo bench --features quanta --bench keyed_peers -- --rounds 5
//! ```

#[path = "common/keys.rs"]
mod keys;
#[path = "common/rounds.rs"]
mod rounds;

use std::hash::Hash;
use std::num::NonZeroU32;
use std::process::Command;
use std::sync::Barrier;
use std::time::Instant;

use dripfeed::keyed::{KeyedBuckets, Quota};
use keys::{rss, shuffled};

const KEYS: usize = 100_000;
const CHECKS: usize = 1_000_000;
const MAX_KEYS: usize = 1 << 17;
/// The contenders: dripfeed's table as built by default, given the time
/// (`try_admit_at` with an instant the caller already holds, so the cost
/// of reading the clock shows apart), with faster hashers, and reading
/// the cycle counter (feature `quanta`) with and without foldhash.
const STORES: [&str; 8] = [
    "dripfeed",
    "governor",
    "throttle-net",
    "dripfeed, time given",
    "dripfeed, foldhash",
    "dripfeed, Prehashed",
    "dripfeed, quanta",
    "dripfeed, quanta + foldhash",
];

fn text(keys: &[u64]) -> Vec<String> {
    keys.iter().map(|k| format!("tenant-{k:08}")).collect()
}

/// One store's check, whatever the store.
type Check<'a, K> = Box<dyn Fn(&K) -> bool + Sync + 'a>;

/// The store `name`, filled with `keys`, and its check.
fn store<K: Hash + Eq + Clone + Send + Sync + 'static>(
    name: &str,
    keys: &[K],
) -> Check<'static, K> {
    let check: Check<'static, K> = match name {
        "dripfeed" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::new(MAX_KEYS, quota).expect("table");
            Box::new(move |k| table.try_admit(k, 1.0).is_ok())
        }
        "dripfeed, time given" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::new(MAX_KEYS, quota).expect("table");
            // One instant for the fill and another for the checks: each key
            // is checked 10 times, well within its burst of 100.
            let now = tokio::time::Instant::now();
            let checks = now + std::time::Duration::from_secs(1);
            Box::new(move |k| {
                let at = if table.len() < KEYS { now } else { checks };
                table.try_admit_at(k, 1.0, at).is_ok()
            })
        }
        "dripfeed, foldhash" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::builder(MAX_KEYS, quota)
                .hasher(foldhash::fast::RandomState::default())
                .build()
                .expect("table");
            Box::new(move |k| table.try_admit(k, 1.0).is_ok())
        }
        "dripfeed, Prehashed" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::builder(MAX_KEYS, quota)
                .hasher(dripfeed::keyed::Prehashed)
                .build()
                .expect("table");
            Box::new(move |k| table.try_admit(k, 1.0).is_ok())
        }
        "dripfeed, quanta" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::builder(MAX_KEYS, quota)
                .quanta_clock(quanta::Clock::new())
                .build()
                .expect("table");
            Box::new(move |k| table.try_admit(k, 1.0).is_ok())
        }
        "dripfeed, quanta + foldhash" => {
            let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
            let table = KeyedBuckets::<K>::builder(MAX_KEYS, quota)
                .hasher(foldhash::fast::RandomState::default())
                .quanta_clock(quanta::Clock::new())
                .build()
                .expect("table");
            Box::new(move |k| table.try_admit(k, 1.0).is_ok())
        }
        "governor" => {
            let q = governor::Quota::per_second(NonZeroU32::new(10).expect("10"))
                .allow_burst(NonZeroU32::new(100).expect("100"));
            let limiter = governor::RateLimiter::<K, _, _>::keyed(q);
            Box::new(move |k| limiter.check_key(k).is_ok())
        }
        _ => {
            let limiter = throttle_net::PerKey::<K>::builder()
                .per_second(10)
                .burst(100)
                .build();
            Box::new(move |k| limiter.try_acquire(k))
        }
    };
    for k in keys {
        assert!(check(k), "a first admission");
    }
    check
}

/// Nanoseconds per check over `CHECKS` checks from `threads` threads.
fn ns_per_check<K: Sync>(check: &Check<'_, K>, keys: &[K], threads: usize) -> f64 {
    let per = CHECKS / threads;
    let barrier = Barrier::new(threads + 1);
    let start = std::thread::scope(|s| {
        for t in 0..threads {
            let barrier = &barrier;
            s.spawn(move || {
                let mut i = t * keys.len() / threads;
                barrier.wait();
                let mut passed = 0;
                for _ in 0..per {
                    passed += usize::from(check(&keys[i]));
                    i += 1;
                    if i == keys.len() {
                        i = 0;
                    }
                }
                assert_eq!(passed, per, "every check is an admission");
            });
        }
        barrier.wait();
        Instant::now()
    });
    start.elapsed().as_nanos() as f64 / (per * threads) as f64
}

/// One round of ns per check, every store in turn from `first`.
fn round<K>(keys: &[K], threads: usize, first: usize) -> [f64; STORES.len()]
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    let mut out = [f64::NAN; STORES.len()];
    // ONLY=dripfeed (a store's name): that one alone, for a profile.
    let only = std::env::var("ONLY").ok();
    for i in 0..STORES.len() {
        let k = (i + first) % STORES.len();
        if only.as_deref().is_some_and(|o| o != STORES[k]) {
            continue;
        }
        let check = store(STORES[k], keys);
        out[k] = ns_per_check(&check, keys, threads);
    }
    out
}

/// In a child process: bytes per key of one store and key type.
fn mem(name: &str, key: &str) {
    let ids = shuffled(KEYS);
    let before;
    let _keep: Box<dyn std::any::Any> = if key == "u64" {
        before = rss();
        Box::new(store(name, &ids))
    } else {
        let texts = text(&ids);
        before = rss();
        let check = store(name, &texts);
        Box::new((check, texts))
    };
    println!("{}", (rss() - before) as f64 / KEYS as f64);
}

/// Bytes per key of `name` with `key` keys, from a fresh process.
fn bytes_per_key(name: &str, key: &str) -> f64 {
    let exe = std::env::current_exe().expect("the bench itself");
    let out = Command::new(exe)
        .args(["mem", name, key])
        .output()
        .expect("a child");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN)
}

fn table<K>(label: &str, keys: &[K], rounds: usize)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    for threads in [1, 8] {
        if !rounds::wanted(&format!("{label}/{threads}t")) {
            continue;
        }
        let runs: Vec<[f64; STORES.len()]> = (0..rounds).map(|r| round(keys, threads, r)).collect();
        for (k, name) in STORES.iter().enumerate() {
            let ns: Vec<f64> = runs.iter().map(|r| r[k]).collect();
            let ratio: Vec<f64> = runs.iter().map(|r| r[k] / r[1]).collect();
            println!(
                "| {label} | {threads} | {name} | {} | {} |",
                rounds::spread(&ns, 1),
                rounds::spread(&ratio, 2)
            );
        }
    }
    if rounds::wanted(&format!("{label}/mem")) {
        // The time given changes nothing kept.
        let bytes: Vec<f64> = STORES[..3]
            .iter()
            .map(|s| bytes_per_key(s, label))
            .collect();
        for (name, b) in STORES.iter().zip(&bytes) {
            println!(
                "| {label} | bytes per key | {name} | {b:.1} | {:.2} |",
                b / bytes[1]
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("mem") {
        mem(&args[2], &args[3]);
        return;
    }
    let rounds = rounds::rounds(5);
    println!("keyed, {KEYS} keys, {CHECKS} checks per run, {rounds} rounds");
    println!("| keys | threads | store | ns per check, median (min–max) | ÷ governor |");
    println!("|---|---:|---|---:|---:|");
    let ids = shuffled(KEYS);
    table("u64", &ids, rounds);
    table("String", &text(&ids), rounds);
    if rounds::wanted("evicting") {
        evicting(rounds);
    }
}

/// dripfeed's table when it evicts (no peer bounds its keys the same way:
/// governor's grows, throttle-net's refuses new keys when full): twice
/// `MAX_KEYS` keys cycled in a shuffled order, so every check after the
/// first pass is a new key that evicts the soonest-empty bucket.
fn evicting(rounds: usize) {
    let keys = shuffled(2 * MAX_KEYS);
    let quota = Quota::per_second(10.0).burst(100.0).expect("quota");
    let ns: Vec<f64> = (0..rounds)
        .map(|_| {
            let table = KeyedBuckets::<u64>::new(MAX_KEYS, quota).expect("table");
            for k in &keys {
                let _ = table.try_admit(k, 1.0);
            }
            let start = Instant::now();
            for i in 0..CHECKS {
                let _ = table.try_admit(&keys[i % keys.len()], 1.0);
            }
            start.elapsed().as_nanos() as f64 / CHECKS as f64
        })
        .collect();
    println!(
        "| u64 | 1, every check evicting | dripfeed | {} | – |",
        rounds::spread(&ns, 1)
    );
}
