//! The classic burst, in process: 1,000 webhooks/s for 5 s offered to a
//! receiver that takes 200/s, through a throttle with a 2 s latency budget
//! (capacity 400). Prints what was accepted, refused (with the Retry-After
//! range), the peak depth, what was delivered, and that nothing was lost.
//!
//! Run: `cargo run --release --example webhook_relay`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::{Attempt, Delivery, Outcome, Throttle, headers};
use tokio::time::{Instant, MissedTickBehavior, interval};

#[tokio::main]
async fn main() {
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let receiver = move |_body: &Vec<u8>, _: Attempt| {
        let r = r.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await; // the receiver's latency
            r.fetch_add(1, Ordering::Relaxed);
            Delivery::Done
        }
    };
    let (throttle, _drain) = Throttle::builder()
        .name("webhook_relay")
        .drain_rate(200.0)
        .latency_budget(Duration::from_secs(2))
        .build(receiver)
        .expect("valid configuration");
    println!(
        "dripfeed demo: 1,000 webhooks/s for 5 s into a drain of {}/s, capacity {}",
        throttle.drain_rate(),
        throttle.capacity()
    );

    let (mut accepted, mut refused, mut peak) = (0u64, 0u64, 0usize);
    let (mut min_wait, mut max_wait) = (u64::MAX, 0u64);
    let start = Instant::now();
    let mut tick = interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    for _ in 0..500 {
        tick.tick().await;
        for _ in 0..10 {
            match throttle.try_submit(vec![0u8; 256]) {
                Ok(_) => accepted += 1,
                Err(rejected) => {
                    refused += 1;
                    let secs = headers::whole_seconds(rejected.retry_after().unwrap_or_default());
                    min_wait = min_wait.min(secs);
                    max_wait = max_wait.max(secs);
                }
            }
        }
        peak = peak.max(throttle.depth());
        if start.elapsed().as_millis() % 1000 < 10 {
            let s = throttle.stats();
            println!(
                "t={:>4.1}s depth={:>3} rate={}/s delivered={:>4} refused={:>4}",
                start.elapsed().as_secs_f64(),
                s.depth,
                s.drain_rate,
                s.delivered(),
                s.outcome(Outcome::Refused)
            );
        }
    }
    let report = throttle.shutdown(Duration::from_secs(10)).await;
    let s = &report.stats;
    let lost = accepted - s.delivered() - report.returned.len() as u64;
    println!();
    println!(
        "| accepted (202) | refused (503) | Retry-After | peak depth | delivered | elapsed | lost |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {accepted} | {refused} | {}–{} s | {peak} | {} | {:.2} s | {lost} |",
        if refused > 0 { min_wait } else { 0 },
        max_wait,
        received.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    if lost != 0 {
        std::process::exit(1);
    }
}
