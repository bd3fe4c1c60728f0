//! Retry-After spreads the callers it refuses: whole seconds that are not
//! all the same, `RateLimit`'s `t` agreeing with it, and a jitter that
//! differs from one process to the next. Counts over generated samples,
//! never a timing.

use std::collections::BTreeMap;
use std::time::Duration;

use dripfeed::{Delivery, Throttle, headers};

/// 100 queued at 100/s: every refusal's hint is 1.0 s plus up to 20 %.
async fn full_queue() -> Throttle<u32> {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(100)
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    for job in 0..100 {
        throttle.try_submit(job).unwrap();
    }
    throttle
}

#[tokio::test(start_paused = true)]
async fn a_thousand_refusals_told_one_to_one_point_two_seconds_come_back_spread() {
    let throttle = full_queue().await;
    let mut told: BTreeMap<u64, u32> = BTreeMap::new();
    for job in 0..1000 {
        let refused = throttle.try_submit(job).unwrap_err();
        let hint = refused.retry_after().unwrap();
        assert!(hint >= Duration::from_secs(1) && hint <= Duration::from_millis(1200));
        let fields = headers::for_rejected(&refused);
        let (name, value) = &fields[0];
        assert_eq!(*name, "retry-after");
        let secs: u64 = value.parse().unwrap();
        assert!(secs >= hint.as_secs(), "never below the hint's floor");
        let ratelimit = &fields[2].1;
        assert!(
            ratelimit.ends_with(&format!(";t={secs}")),
            "RateLimit's t agrees with Retry-After: {ratelimit} vs {secs}"
        );
        *told.entry(secs).or_default() += 1;
    }
    assert!(told.len() >= 2, "at least two distinct values: {told:?}");
    let most = told.values().max().copied().unwrap_or(0);
    assert!(most <= 600, "none carries more than 60 %: {told:?}");
}

/// The first refusals' hints in this process, as nanoseconds.
async fn first_hints() -> Vec<u128> {
    let throttle = full_queue().await;
    (0..8)
        .map(|job| {
            let refused = throttle.try_submit(job).unwrap_err();
            refused.retry_after().unwrap().as_nanos()
        })
        .collect()
}

/// Run by `two_processes_jitter_differently` in a child process: prints the
/// first hints.
#[tokio::test(start_paused = true)]
async fn print_first_hints_when_asked() {
    if std::env::var_os("DRIPFEED_PRINT_HINTS").is_none() {
        return;
    }
    println!("HINTS {:?}", first_hints().await);
}

#[test]
fn two_processes_jitter_differently() {
    let run = || {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "retry_after::print_first_hints_when_asked",
                "--nocapture",
            ])
            .env("DRIPFEED_PRINT_HINTS", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("HINTS ").map(str::to_owned))
            .unwrap_or_else(|| panic!("no hints printed: {text}"))
    };
    let (a, b) = (run(), run());
    assert_ne!(a, b, "two processes drew the same jitter");
}
