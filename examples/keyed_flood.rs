//! Key rotation flood: 10,000,000 distinct keys through a table of 100,000
//! buckets. Prints the live count bound, evictions, RSS and throughput.
//!
//! `cargo run --release --example keyed_flood`

use std::time::{Duration, Instant as StdInstant};

use dripfeed::keyed::{KeyedBuckets, Quota};
use tokio::time::Instant;

fn rss_mib() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    (pages * 4096) as f64 / (1 << 20) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const KEYS: u64 = 10_000_000;
    const MAX: usize = 100_000;
    println!("rss at start: {:.1} MiB", rss_mib());
    let table = KeyedBuckets::new(MAX, Quota::per_second(1.0).burst(10.0)?)?;
    println!(
        "rss after build: {:.1} MiB (reserved {} B)",
        rss_mib(),
        table.reserved_bytes()
    );
    let t0 = Instant::now();
    let started = StdInstant::now();
    let mut most = 0;
    for i in 0..KEYS {
        // Costs 1..=7 at 1 µs steps: buckets hold debt, so most evictions
        // take the soonest-empty bucket rather than a drained one.
        table.try_admit_at(&i, 1.0 + (i % 7) as f64, t0 + Duration::from_micros(i))?;
        most = most.max(table.len());
        if i == 1_000_000 {
            println!("rss after 1M keys: {:.1} MiB", rss_mib());
        }
    }
    let took = started.elapsed();
    println!("rss after {KEYS} keys: {:.1} MiB", rss_mib());
    println!(
        "live {} (max seen {most}, bound {MAX}), evictions {}",
        table.len(),
        table.evictions()
    );
    println!(
        "{:.0} ns per admission with eviction",
        took.as_nanos() as f64 / KEYS as f64
    );
    assert!(most <= MAX);
    Ok(())
}
