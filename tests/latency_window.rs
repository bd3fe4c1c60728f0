//! The sliding latency window: rotation, long gaps, counts and precision.

use std::time::Duration;

use dripfeed::rate::{
    DEFAULT_SUB_WINDOWS, DEFAULT_WINDOW, LatencyWindow, MAX_SUB_WINDOWS, WindowError,
};
use tokio::time::Instant;

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn window() -> LatencyWindow {
    match LatencyWindow::new(DEFAULT_WINDOW, DEFAULT_SUB_WINDOWS) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn rejects_bad_config() {
    assert_eq!(
        LatencyWindow::new(S, MAX_SUB_WINDOWS + 1).err(),
        Some(WindowError::SubWindows(MAX_SUB_WINDOWS + 1))
    );
    assert_eq!(
        LatencyWindow::new(MS, 2).err(),
        Some(WindowError::SubWindowTooShort)
    );
    assert!(LatencyWindow::new(MS, 1).is_ok());
}

#[test]
fn error_messages_are_short_lowercase() {
    for e in [
        WindowError::ZeroWindow,
        WindowError::SubWindows(0),
        WindowError::SubWindowTooShort,
    ] {
        let m = e.to_string();
        assert!(m.chars().next().is_some_and(|c| c.is_lowercase()), "{m}");
        assert!(m.len() < 60, "{m}");
    }
}

#[test]
fn slides_one_sub_window_at_a_time() {
    let mut w = window();
    let t0 = Instant::now();
    for s in 0..5u32 {
        // One sample per second, latency (s+1) * 100 ms.
        w.record(t0 + S * s, MS * (100 * (s + 1)));
    }
    assert_eq!(w.summary(t0 + S * 4).samples, 5);
    let s = w.summary(t0 + S * 6);
    assert_eq!(s.samples, 3);
    let max = s.max.as_millis();
    assert!(
        (500..=532).contains(&max),
        "within a bucket (6.25 %), never below: {max}"
    );
    assert_eq!(w.summary(t0 + S * 8 + MS * 999).samples, 1);
    assert_eq!(w.summary(t0 + S * 9).samples, 0);
}

#[test]
fn long_gap_clears_everything_even_when_slots_realign() {
    let mut w = window();
    let t0 = Instant::now();
    w.record(t0, MS * 7);
    w.record_failure(t0);
    w.record_timeout(t0);
    w.record_congestion(t0, Some(S));
    // Exactly 10 windows later the ring index is the same as at t0.
    let later = t0 + S * 50;
    w.record(later, MS * 3);
    let s = w.summary(later);
    assert_eq!(s.samples, 1);
    assert_eq!(s.max.as_millis(), 3);
    assert_eq!((s.failures, s.timeouts, s.congestion), (0, 0, 0));
    assert_eq!(s.retry_hint, None);
}

#[test]
fn gap_longer_than_window_without_new_records_reads_empty() {
    let mut w = window();
    let t0 = Instant::now();
    for _ in 0..100 {
        w.record(t0, MS * 900);
        w.record_failure(t0);
    }
    let s = w.summary(t0 + S * 3600);
    assert_eq!(s, dripfeed::rate::WindowSummary::default());
}

#[test]
fn counts_and_shares() {
    let mut w = window();
    let t0 = Instant::now();
    for _ in 0..90 {
        w.record(t0, MS * 10);
    }
    for _ in 0..6 {
        w.record_failure(t0 + MS * 100);
    }
    for _ in 0..4 {
        w.record_timeout(t0 + S);
    }
    w.record_congestion(t0 + S, None);
    w.record_congestion(t0 + S, Some(S * 3));
    w.record_congestion(t0 + S * 2, Some(S));
    let s = w.summary(t0 + S * 2);
    assert_eq!(
        (s.samples, s.failures, s.timeouts, s.congestion),
        (90, 6, 4, 3)
    );
    assert!((s.failure_share - 10.0 / 103.0).abs() < 1e-12);
    assert_eq!(s.retry_hint, Some(S * 3), "largest hint in the window");
    // Once the sub-window holding the 3 s hint rotates out, the 1 s one is left.
    assert_eq!(w.summary(t0 + S * 6).retry_hint, Some(S));
}

#[test]
fn late_timestamps_count_as_latest() {
    let mut w = window();
    let t0 = Instant::now();
    w.record(t0 + S * 10, MS);
    // Older than anything seen: lands in the current sub-window.
    w.record(t0, MS * 2);
    assert_eq!(w.summary(t0 + S * 10).samples, 2);
}

#[test]
fn extreme_values_saturate() {
    let mut w = window();
    let t0 = Instant::now();
    w.record(t0, Duration::ZERO);
    w.record(t0, Duration::MAX);
    let s = w.summary(t0);
    assert_eq!(s.samples, 2);
    assert!(s.max >= Duration::from_secs(60) && s.max < Duration::from_secs(61));
    assert_eq!(w.summary(t0).samples, 2, "summary is repeatable");
}

#[test]
fn percentiles_match_within_precision() {
    let mut w = window();
    let t0 = Instant::now();
    for i in 0..10_000u32 {
        w.record(
            t0 + MS * (i % 4000),
            Duration::from_micros(u64::from(i) * 50),
        );
    }
    let s = w.summary(t0 + S * 4);
    // A quantile is the top of its bucket: never below, at most 6.25 % above.
    let p99 = s.p99.as_secs_f64();
    assert!((0.495..=0.495 * 1.0625).contains(&p99), "{p99}");
    let p50 = s.p50.as_secs_f64();
    assert!((0.25..=0.25 * 1.0625).contains(&p50), "{p50}");
}

#[tokio::test(start_paused = true)]
async fn follows_tokio_paused_clock() {
    let mut w = window();
    w.record(Instant::now(), MS * 80);
    tokio::time::advance(S * 4).await;
    assert_eq!(w.summary(Instant::now()).samples, 1);
    tokio::time::advance(S).await;
    assert_eq!(w.summary(Instant::now()).samples, 0);
}
