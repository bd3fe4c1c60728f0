//! Drives the builder, the drain rate, the per-key maths and the header
//! rendering with arbitrary bit patterns as f64 (NaN, infinities,
//! subnormals, huge costs): every input must give a value or a typed error.
//!
//! `cargo fuzz run inputs` (from `fuzz/`); mirrored by `tests/hostile_inputs.rs`.
#![no_main]

use std::time::Duration;

use dripfeed::keyed::{KeyedBuckets, Quota};
use dripfeed::{Delivery, Throttle, headers};
use libfuzzer_sys::fuzz_target;
use tokio::time::Instant;

fn f64_at(data: &[u8], i: usize) -> f64 {
    let mut b = [0u8; 8];
    for (k, slot) in b.iter_mut().enumerate() {
        *slot = data.get(i * 8 + k).copied().unwrap_or(0);
    }
    f64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let (rate, max, size, kr) = (f64_at(data, 0), f64_at(data, 1), f64_at(data, 2), f64_at(data, 3));
    let budget = Duration::from_nanos(f64_at(data, 4).to_bits());
    let builder = Throttle::<u8>::builder()
        .drain_rate(rate)
        .max_rate(max)
        .latency_budget(budget);
    // Every configuration is validated; only small rings are allocated (a
    // valid multi-gigabyte ring is not what this target looks for).
    let small = builder.validate().is_ok() && budget.as_secs_f64() * max < 1e6;
    if small
        && let Ok((throttle, _drain)) =
            builder.build_unspawned(|_: &u8, _| async { Delivery::Done })
    {
        let _ = throttle.set_drain_rate(f64_at(data, 5));
        assert!(throttle.capacity() >= 1);
    }
    let _ = headers::retry_after(Duration::from_nanos(f64_at(data, 6).to_bits()));
    if let Ok(quota) = Quota::per_second(kr).burst(size) {
        if let Ok(table) = KeyedBuckets::new(2, quota) {
            let mut now = Instant::now();
            for i in 7..data.len() / 8 {
                let cost = f64_at(data, i);
                now += Duration::from_nanos(u64::from(data[i * 8 % data.len()]) * 1_000_000);
                let key = i as u64 % 3;
                let _ = table.try_admit_at(&key, cost, now);
                let _ = table.can_admit_at(&key, cost, now);
                let _ = table.settle_at(&key, cost, f64_at(data, i - 1), now);
                assert!(table.debt_at(&key, now) >= 0.0);
            }
        }
    }
});
