//! Eviction order, bounds, concurrency and memory of `KeyedBuckets`.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota, TableError};
use tokio::time::Instant;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// One shard of three slots under quota (10, 1/s), so order is exact.
fn table3() -> KeyedBuckets<&'static str> {
    KeyedBuckets::builder(3, Quota::per_second(1.0).burst(10.0).unwrap())
        .shards(1)
        .build()
        .unwrap()
}

fn fill(t: &KeyedBuckets<&'static str>, now: Instant, debts: [(&'static str, f64); 3]) {
    for (k, d) in debts {
        t.try_admit_at(&k, d, now).unwrap();
    }
}

#[test]
fn zero_debt_bucket_goes_first() {
    let (t, t0) = (table3(), Instant::now());
    fill(&t, t0, [("a", 5.0), ("b", 1.0), ("c", 8.0)]);
    let now = t0 + secs(2.0); // b drained at 1 s; a drains at 5 s, c at 8 s
    t.try_admit_at(&"d", 1.0, now).unwrap();
    assert_eq!((t.len(), t.evictions()), (3, 1));
    assert_eq!(t.debt_at(&"a", now), 3.0);
    assert_eq!(t.debt_at(&"c", now), 6.0);
    assert_eq!(t.debt_at(&"d", now), 1.0);
}

#[test]
fn soonest_empty_goes_when_none_is_drained() {
    let (t, t0) = (table3(), Instant::now());
    fill(&t, t0, [("a", 5.0), ("b", 2.0), ("c", 8.0)]);
    let now = t0 + secs(1.0);
    t.try_admit_at(&"d", 1.0, now).unwrap();
    assert_eq!(t.evictions(), 1);
    assert_eq!(
        t.debt_at(&"b", now),
        0.0,
        "b (empty at 2 s) was evicted with its debt"
    );
    assert_eq!((t.debt_at(&"a", now), t.debt_at(&"c", now)), (4.0, 7.0));
}

#[test]
fn soonest_empty_accounts_for_per_key_rates() {
    let (t, t0) = (table3(), Instant::now());
    t.set_quota_at("a", Quota::per_second(10.0).burst(10.0).unwrap(), t0)
        .unwrap();
    fill(&t, t0, [("a", 9.0), ("b", 1.0), ("c", 3.0)]); // a empties at 0.9 s, b at 1 s
    t.try_admit_at(&"d", 1.0, t0).unwrap();
    assert_eq!(t.debt_at(&"a", t0), 0.0);
    assert_eq!((t.debt_at(&"b", t0), t.debt_at(&"c", t0)), (1.0, 3.0));
}

#[test]
fn later_admissions_postpone_eviction() {
    let (t, t0) = (table3(), Instant::now());
    fill(&t, t0, [("a", 1.0), ("b", 3.0), ("c", 5.0)]);
    t.try_admit_at(&"a", 5.0, t0).unwrap(); // a now empties at 6 s, after b and c
    t.try_admit_at(&"d", 1.0, t0).unwrap();
    assert_eq!(
        (
            t.debt_at(&"a", t0),
            t.debt_at(&"b", t0),
            t.debt_at(&"c", t0)
        ),
        (6.0, 0.0, 5.0)
    );
}

#[test]
fn refunds_and_faster_rates_bring_eviction_forward() {
    let (t, t0) = (table3(), Instant::now());
    fill(&t, t0, [("a", 9.0), ("b", 5.0), ("c", 7.0)]);
    assert_eq!(t.settle_at(&"a", 9.0, 1.0, t0), Ok(1.0)); // a empties at 1 s
    t.try_admit_at(&"d", 1.0, t0).unwrap();
    assert_eq!((t.debt_at(&"a", t0), t.debt_at(&"b", t0)), (0.0, 5.0));

    let (t, t0) = (table3(), Instant::now());
    fill(&t, t0, [("a", 6.0), ("b", 3.0), ("c", 4.0)]);
    t.set_quota_at("a", Quota::per_second(6.0).burst(10.0).unwrap(), t0)
        .unwrap(); // a empties at 1 s
    t.try_admit_at(&"d", 1.0, t0).unwrap();
    assert_eq!((t.debt_at(&"a", t0), t.debt_at(&"b", t0)), (0.0, 3.0));
    assert_eq!(t.quota(&"a").rate(), 6.0, "overrides outlive their bucket");
}

#[test]
fn settle_can_exceed_size_and_then_the_key_waits() {
    let (t, t0) = (table3(), Instant::now());
    t.try_admit_at(&"a", 4.0, t0).unwrap();
    assert_eq!(t.settle_at(&"a", 4.0, 14.0, t0), Ok(14.0));
    let Err(AdmitError::OverQuota(o)) = t.try_admit_at(&"a", 2.0, t0) else {
        panic!("admitted above size")
    };
    assert_eq!(o.retry_after(), secs(6.0));
    assert!(t.try_admit_at(&"a", 2.0, t0 + secs(6.0)).is_ok());
    assert_eq!(t.settle_at(&"gone", 3.0, 1.0, t0), Ok(0.0));
    assert_eq!(t.len(), 1, "a refund to an unknown key stores nothing");
}

#[test]
fn errors_are_typed() {
    let q = Quota::per_second(1.0).burst(2.0).unwrap();
    let t = KeyedBuckets::builder(4, q)
        .max_overrides(1)
        .build()
        .unwrap();
    assert_eq!(
        t.try_admit(&1, 3.0),
        Err(AdmitError::CostExceedsSize {
            cost: 3.0,
            size: 2.0
        })
    );
    assert!(matches!(
        t.try_admit(&1, f64::NAN),
        Err(AdmitError::InvalidCost(_))
    ));
    assert!(matches!(
        t.can_admit(&1, -1.0),
        Err(AdmitError::InvalidCost(_))
    ));
    assert!(t.settle(&1, f64::INFINITY, 1.0).is_err());
    t.set_quota(1, Quota::per_second(1.0).burst(8.0).unwrap())
        .unwrap();
    assert!(t.try_admit(&1, 3.0).is_ok(), "override size applies");
    assert!(t.set_quota(2, q).is_err(), "override map is bounded");
    assert!(
        t.set_quota(1, q).is_ok(),
        "replacing an override is not a new one"
    );
    assert_eq!(
        KeyedBuckets::<u8>::new(0, q).err(),
        Some(TableError::ZeroKeys)
    );
    assert_eq!(
        KeyedBuckets::<u8>::builder(4, q).shards(0).build().err(),
        Some(TableError::ZeroShards)
    );
    assert!(KeyedBuckets::<u8>::new(usize::MAX, q).is_err());
}

#[tokio::test(start_paused = true)]
async fn plain_calls_follow_tokio_time() {
    let t = KeyedBuckets::new(10, Quota::per_second(4.0).burst(2.0).unwrap()).unwrap();
    t.try_admit(&"k", 2.0).unwrap();
    let Err(AdmitError::OverQuota(o)) = t.try_admit(&"k", 1.0) else {
        panic!()
    };
    assert_eq!(o.retry_after(), Duration::from_millis(250));
    tokio::time::advance(o.retry_after()).await;
    assert!(t.can_admit(&"k", 1.0).is_ok());
    assert_eq!(t.try_admit(&"k", 1.0).unwrap().debt(), 2.0);
    assert_eq!(t.debt(&"k"), 2.0);
}

#[test]
fn concurrent_admissions_never_overshoot() {
    // Rate ~0: each key admits exactly `size` unit costs in total.
    let t =
        Arc::new(KeyedBuckets::new(64, Quota::per_second(1e-12).burst(1000.0).unwrap()).unwrap());
    let now = Instant::now();
    let admitted: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let t = &t;
                s.spawn(move || {
                    (0..4000)
                        .filter(|i| t.try_admit_at(&(i % 4), 1.0, now).is_ok())
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(admitted, 4 * 1000);
    assert_eq!(t.len(), 4);
}

/// Threads that read the clock at once and take the shard's lock in
/// either order: each is admitted once the burst has room for all of
/// them. A bucket is kept as when it empties, so a later time followed by
/// an earlier one would count the time between as owed; `try_admit` reads
/// the clock under the lock, so the order of the times is the order of
/// the admissions (before, 53–68 rounds in 20,000 admitted fewer than 8 at
/// 10^6/s).
#[test]
fn racing_threads_each_get_the_burst_they_share() {
    let rounds = 2_000;
    let t = Arc::new(
        KeyedBuckets::<u32>::new(rounds, Quota::per_second(1e6).burst(8.0).unwrap()).unwrap(),
    );
    let barrier = std::sync::Barrier::new(8);
    let short: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (t, barrier) = (&t, &barrier);
                s.spawn(move || {
                    (0..rounds as u32)
                        .map(|key| {
                            barrier.wait();
                            usize::from(t.try_admit(&key, 1.0).is_err())
                        })
                        .sum::<usize>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(short, 0, "admissions refused with the burst's room");
}

/// A table the system cannot give its memory is refused with a typed
/// error before any shard writes its memory (shard by shard, each was
/// granted and the process killed as they were written).
#[test]
fn a_table_too_big_for_the_machine_is_refused() {
    let q = Quota::per_second(1.0).burst(1.0).unwrap();
    // 2^44 keys: hundreds of terabytes, past any machine's address space.
    let built = KeyedBuckets::<u8>::builder(1 << 44, q)
        .shards(usize::MAX)
        .build();
    assert_eq!(built.err(), Some(TableError::OutOfMemory));
}

#[test]
fn concurrent_churn_respects_the_bound() {
    let t = KeyedBuckets::new(1000, Quota::per_second(1.0).burst(1.0).unwrap()).unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let t = &t;
            s.spawn(move || {
                for i in 0..50_000u64 {
                    t.try_admit_at(&((w << 32) | i), 1.0, t0 + Duration::from_micros(i))
                        .unwrap();
                    assert!(t.len() <= 1000);
                }
            });
        }
    });
    assert!(t.len() <= 1000);
    assert_eq!(t.evictions() + t.len() as u64, 200_000);
}

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Key rotation: 1,000,000 distinct keys through 100,000 slots (the
/// 10,000,000-key run is `examples/keyed_flood.rs`). In a process of its
/// own: the other tests of the binary would grow its resident memory too.
#[test]
fn key_rotation_flood_keeps_memory_flat() {
    if !support::in_own_process("keyed_eviction::key_rotation_flood_keeps_memory_flat") {
        return;
    }
    let t = KeyedBuckets::new(100_000, Quota::per_second(1.0).burst(10.0).unwrap()).unwrap();
    let t0 = Instant::now();
    let mut full_rss = None;
    for i in 0..1_000_000u64 {
        t.try_admit_at(&i, 1.0 + (i % 7) as f64, t0 + Duration::from_micros(i))
            .unwrap();
        if i == 200_000 {
            full_rss = rss_bytes();
        }
    }
    assert!(t.len() <= 100_000 && t.len() > 99_000, "len {}", t.len());
    assert_eq!(t.evictions() + t.len() as u64, 1_000_000);
    if let (Some(before), Some(after)) = (full_rss, rss_bytes()) {
        eprintln!("rss after 200k keys {before} B, after 1M keys {after} B");
        assert!(
            after < before + (16 << 20),
            "memory grew: {before} -> {after}"
        );
    }
}

/// 3,072 keys take turns through a table with room for 1,024 (10/s,
/// burst 10), each asking 20 times per turn, 10 turns in 3 s. Without a
/// ledger an evicted key comes back with a fresh burst, so keys are let
/// through far above their quota; with one, none is let through more than
/// its burst and 3 s of its rate (10 + 30), and most get at least their
/// burst.
#[test]
fn a_ledger_keeps_rotating_keys_to_their_quota() {
    const KEYS: u64 = 3072;
    const TURNS: u64 = 10;
    let quota = Quota::per_second(10.0).burst(10.0).unwrap();
    let run = |ledger: usize| {
        let t: KeyedBuckets<u64> = KeyedBuckets::builder(1024, quota)
            .remember_evicted(ledger)
            .build()
            .unwrap();
        let t0 = Instant::now();
        let step = secs(3.0) / u32::try_from(KEYS * TURNS).unwrap();
        let mut admitted = vec![0u32; KEYS as usize];
        let mut now = t0;
        for _ in 0..TURNS {
            for key in 0..KEYS {
                for _ in 0..20 {
                    if t.try_admit_at(&key, 1.0, now).is_ok() {
                        admitted[key as usize] += 1;
                    }
                }
                now += step;
            }
        }
        admitted
    };
    let without = run(0);
    let most = without.iter().max().copied().unwrap_or(0);
    assert!(
        most > 40,
        "without a ledger the rotation walks through: {most}"
    );

    let with = run(4 * KEYS as usize);
    let most_with = with.iter().max().copied().unwrap_or(0);
    eprintln!("rotation: at most {most} per key without a ledger, {most_with} with one");
    let most = most_with;
    assert!(
        most <= 41,
        "with a ledger: {most} admitted for one key (at most 40)"
    );
    let at_least_burst = with.iter().filter(|n| **n >= 10).count();
    assert!(
        at_least_burst * 10 >= KEYS as usize * 9,
        "{at_least_burst} of {KEYS} got their burst"
    );
}
