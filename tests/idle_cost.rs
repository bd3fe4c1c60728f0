//! What an idle destination costs in heap: the live bytes a counting
//! allocator (dhat) sees grow when 2,000 destinations each take one job,
//! deliver it and go idle. The target is at most 2 KiB each; it holds its
//! record (name, overrides, breaker, counts) and its map entry, and no
//! throttle, ring, task or timer.
//!
//! Paused time; one test in this file, as dhat's global allocator counts
//! every allocation of the process.

use std::time::Duration;

use dripfeed::destinations::Destinations;
use dripfeed::{Delivery, Throttle};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const N: usize = 2_000;

#[test]
fn an_idle_destination_holds_at_most_2_kib_of_heap() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let set = Destinations::builder(
            Throttle::builder()
                .drain_rate(100.0)
                .latency_budget(Duration::from_secs(2)),
        )
        .max_destinations(N + 1)
        .build(|_: &str| |_: &Vec<u8>, _| async { Delivery::Done })
        .unwrap();
        let names: Vec<String> = (0..N).map(|i| format!("customer-{i:05}.example")).collect();
        // One destination first: what the first throttle sets up once
        // (the runtime's timer, the clock) is not a destination's cost.
        set.try_submit("warm-up", vec![0u8; 64]).unwrap();
        idle(&set).await;
        let before = dhat::HeapStats::get();

        for name in &names {
            set.try_submit(name, vec![0u8; 64]).unwrap();
        }
        assert_eq!(set.active(), N, "every new destination made its throttle");
        idle(&set).await;
        let after = dhat::HeapStats::get();

        let delivered: u64 = set.all_stats().iter().map(|s| s.delivered()).sum();
        assert_eq!(delivered, N as u64 + 1);
        let bytes = (after.curr_bytes - before.curr_bytes) as f64 / N as f64;
        let blocks = (after.curr_blocks - before.curr_blocks) as f64 / N as f64;
        eprintln!(
            "idle destination: {bytes:.0} bytes in {blocks:.1} heap blocks (the names' own Strings, {} bytes each, are the test's)",
            names[0].capacity()
        );
        assert!(bytes <= 2048.0, "{bytes:.0} bytes per idle destination");
        assert_eq!(set.active(), 0);
    });
}

/// Waits (paused time) until no destination holds a throttle and the
/// retired drain tasks have ended.
async fn idle<J: Send + Sync + 'static>(set: &Destinations<J>) {
    for _ in 0..1_000 {
        if set.active() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(set.active(), 0, "every destination went idle");
    // The closed throttles' tasks finish on their next poll.
    tokio::time::sleep(Duration::from_millis(100)).await;
}
