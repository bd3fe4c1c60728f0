//! What 10,000 idle destinations cost: each takes one job, delivers it and
//! goes idle; then the process sits for 5 s. Prints the memory per idle
//! destination (RSS growth over the set's creation), the CPU used while
//! idle, and how many destinations still hold a throttle (a drain task,
//! hence possible timer wake-ups). Linux only (reads /proc/self).
//!
//! cargo run --release --example fanout_idle

use std::time::{Duration, Instant};

use dripfeed::destinations::Destinations;
use dripfeed::{Delivery, Throttle};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

/// User + system CPU time of the process, in clock ticks (1/100 s).
fn cpu_ticks() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.to_owned();
            let f: Vec<&str> = after.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    const N: usize = 10_000;
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(100.0)
            .latency_budget(Duration::from_secs(2)),
    )
    .max_destinations(N)
    .build(|_: &str| |_: &Vec<u8>, _| async { Delivery::Done })
    .expect("a valid set");
    let before = rss_kib();
    let names: Vec<String> = (0..N).map(|i| format!("customer-{i:05}.example")).collect();
    for name in &names {
        set.try_submit(name, vec![0u8; 64]).expect("room");
    }
    let start = Instant::now();
    while set.active() > 0 && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let delivered: u64 = set.all_stats().iter().map(|s| s.delivered()).sum();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib();
    let ticks = cpu_ticks();
    let idle = Duration::from_secs(5);
    tokio::time::sleep(idle).await;
    let used = cpu_ticks() - ticks;
    println!(
        "destinations {N}, delivered {delivered}, active after idle {}",
        set.active()
    );
    println!(
        "RSS {before} KiB -> {after} KiB: {:.0} bytes per idle destination",
        (after.saturating_sub(before) * 1024) as f64 / N as f64
    );
    println!(
        "CPU over {:?} idle: {} ms ({:.2} % of one core)",
        idle,
        used * 10,
        used as f64 * 10.0 / idle.as_millis() as f64 * 100.0
    );
}
