//! The AIMD controller as a pure function: validation, pacing of decisions,
//! cuts, cooldown, floor and ceiling, and the approach to the reference rate.

use std::time::Duration;

use dripfeed::rate::WindowSummary;
use dripfeed::rate::{
    Action, Aimd, AimdConfig, AimdError, Decision, HoldReason, MAX_PAUSE, Signal,
};
use tokio::time::Instant;

const S: Duration = Duration::from_secs(1);

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn aimd() -> Aimd {
    match AimdConfig::default().build() {
        Ok(a) => a,
        Err(e) => panic!("{e}"),
    }
}

fn window(p99_ms: u64) -> WindowSummary {
    WindowSummary {
        samples: 500,
        p50: ms(p99_ms / 2),
        p99: ms(p99_ms),
        max: ms(p99_ms),
        ..WindowSummary::default()
    }
}

fn failing(share: f64) -> WindowSummary {
    let failures = (share * 500.0) as u64;
    WindowSummary {
        failures,
        failure_share: failures as f64 / 500.0,
        samples: 500 - failures,
        ..window(40)
    }
}

fn cut(reason: Signal) -> Action {
    Action::Decrease { reason }
}

fn hold(reason: HoldReason) -> Action {
    Action::Hold { reason }
}

#[test]
fn validation_rejects_each_bad_value() {
    let d = AimdConfig::default;
    let cases: Vec<(AimdConfig, AimdError)> = vec![
        (d().with_floor(0.0), AimdError::Floor(0.0)),
        (d().with_floor(-1.0), AimdError::Floor(-1.0)),
        (
            d().with_ceiling(f64::INFINITY),
            AimdError::Ceiling(f64::INFINITY),
        ),
        (
            d().with_floor(50.0).with_ceiling(40.0),
            AimdError::FloorAboveCeiling {
                floor: 50.0,
                ceiling: 40.0,
            },
        ),
        (d().with_target_p99(Duration::ZERO), AimdError::ZeroTarget),
        (d().with_decrease(0.0), AimdError::Decrease(0.0)),
        (d().with_decrease(1.0), AimdError::Decrease(1.0)),
        (
            d().with_gentle_decrease(0.5),
            AimdError::GentleDecrease(0.5),
        ),
        (
            d().with_gentle_decrease(1.0),
            AimdError::GentleDecrease(1.0),
        ),
        (d().with_increase(0.0), AimdError::Increase(0.0)),
        (d().with_interval(Duration::ZERO), AimdError::ZeroInterval),
        (
            d().with_failure_threshold(1.5),
            AimdError::FailureThreshold(1.5),
        ),
    ];
    for (cfg, want) in cases {
        assert_eq!(cfg.build().err(), Some(want));
        let msg = want.to_string();
        assert!(msg.starts_with(|c: char| c.is_lowercase()), "{msg}");
        assert!(msg.len() < 70, "{msg}");
    }
    // NaN cannot be compared with assert_eq!.
    assert!(matches!(
        d().with_decrease(f64::NAN).build(),
        Err(AimdError::Decrease(_))
    ));
    assert!(matches!(
        d().with_failure_threshold(f64::NAN).build(),
        Err(AimdError::FailureThreshold(_))
    ));
    assert!(
        d().with_floor(200.0)
            .with_failure_threshold(0.0)
            .build()
            .is_ok()
    );
}

#[test]
fn acts_once_per_interval() {
    let mut a = aimd();
    let t0 = Instant::now();
    assert_eq!(
        a.decide(t0, 100.0, &window(40), true).action,
        Action::Increase
    );
    for dt in [ms(1), ms(500), ms(999)] {
        let d = a.decide(t0 + dt, 110.0, &window(900), true);
        assert_eq!((d.rate, d.action), (110.0, hold(HoldReason::TooSoon)));
    }
    let d = a.decide(t0 + S, 110.0, &window(900), true);
    assert_eq!(d.action, cut(Signal::Latency));
}

#[test]
fn increases_only_when_busy_with_enough_samples() {
    let mut a = aimd();
    let t0 = Instant::now();
    let idle = a.decide(t0, 100.0, &window(40), false);
    assert_eq!((idle.rate, idle.action), (100.0, hold(HoldReason::Idle)));
    let few = WindowSummary {
        samples: 19,
        ..window(40)
    };
    let d = a.decide(t0 + S, 100.0, &few, true);
    assert_eq!((d.rate, d.action), (100.0, hold(HoldReason::TooFewSamples)));
    // Too few samples to judge latency: a slow trickle does not cut either.
    let d = a.decide(
        t0 + S * 2,
        100.0,
        &WindowSummary {
            samples: 3,
            ..window(900)
        },
        true,
    );
    assert_eq!(d.action, hold(HoldReason::TooFewSamples));
    let d = a.decide(t0 + S * 3, 100.0, &window(40), true);
    assert_eq!((d.rate, d.action), (110.0, Action::Increase));
}

#[test]
fn idle_never_rises_whatever_the_window() {
    let mut a = aimd();
    let t0 = Instant::now();
    for i in 0..100u32 {
        let d = a.decide(t0 + S * i, 50.0, &window(10), false);
        assert_eq!(d.rate, 50.0);
    }
}

#[test]
fn latency_cut_follows_queue_growth_and_overshoot() {
    let t0 = Instant::now();
    // Just above target, not rising: the gentle 3 % cut, less the 10 ms
    // overshoot drained over 2 s (0.5 %).
    let d = aimd().decide(t0, 100.0, &window(160), true);
    assert_eq!(d.action, cut(Signal::Latency));
    assert!((d.rate - 96.5).abs() < 1e-9, "{}", d.rate);
    // 1.2 x target: 0.97 - 0.03 / 2.
    let d = aimd().decide(t0, 100.0, &window(180), true);
    assert!((d.rate - 95.5).abs() < 1e-9, "{}", d.rate);
    // Far above: at most the full x0.75.
    let d = aimd().decide(t0, 100.0, &window(2000), true);
    assert_eq!(d.rate, 75.0);
    // p99 grew 40 ms in 1 s: the queue grows by 4 % a second, so the
    // capacity is rate / 1.04; the cut lands 3 % under it.
    let mut a = aimd();
    assert_eq!(a.decide(t0, 100.0, &window(100), true).rate, 110.0);
    let d = a.decide(t0 + S, 110.0, &window(140), true);
    assert_eq!(d.action, cut(Signal::Latency));
    assert!((d.rate - 110.0 * 0.97 / 1.04).abs() < 1e-9, "{}", d.rate);
    let reference = a.reference_rate().unwrap_or_default();
    assert!((reference - 110.0 / 1.04).abs() < 1e-9, "{reference}");
}

#[test]
fn failures_and_congestion_cut_by_decrease() {
    let t0 = Instant::now();
    let d = aimd().decide(t0, 100.0, &failing(0.06), true);
    assert_eq!(
        (d.action, d.rate, d.pause),
        (cut(Signal::Failures), 75.0, None)
    );
    // At the threshold exactly: no cut.
    let d = aimd().decide(t0, 100.0, &failing(0.05), true);
    assert_eq!(d.action, Action::Increase);
    let congested = WindowSummary {
        congestion: 1,
        retry_hint: Some(S * 2),
        ..window(40)
    };
    let d = aimd().decide(t0, 100.0, &congested, false);
    assert_eq!((d.action, d.rate), (cut(Signal::Congestion), 75.0));
    assert_eq!(d.pause, Some(S * 2), "the retry hint becomes a pause");
    let huge = WindowSummary {
        retry_hint: Some(S * 3600),
        ..congested
    };
    assert_eq!(aimd().decide(t0, 100.0, &huge, true).pause, Some(MAX_PAUSE));
}

#[test]
fn floor_holds_and_never_cuts_below() {
    let mut a = aimd();
    let t0 = Instant::now();
    let d = a.decide(t0, 22.0, &window(5000), true);
    assert_eq!((d.action, d.rate), (cut(Signal::Latency), 20.0));
    for i in 1..30u32 {
        let bad = if i % 2 == 0 {
            window(5000 * u64::from(i))
        } else {
            failing(1.0)
        };
        let d = a.decide(t0 + S * i, 20.0, &bad, true);
        assert_eq!(d.rate, 20.0);
        assert!(!d.changed(), "{d:?}");
    }
    let d = a.decide(t0 + S * 60, 20.0, &failing(0.5), true);
    assert_eq!(d.action, hold(HoldReason::AtFloor));
}

#[test]
fn one_slow_window_is_punished_once() {
    let mut a = aimd();
    let t0 = Instant::now();
    assert_eq!(a.decide(t0, 100.0, &window(160), true).rate, 96.5);
    // The same evidence stays in the window for the whole cooldown.
    for i in 1..6u32 {
        let d = a.decide(t0 + S * i, 96.5, &window(160), true);
        assert_eq!((d.rate, d.action), (96.5, hold(HoldReason::Cooldown)));
    }
    // Good windows during the cooldown do not increase either.
    let mut b = aimd();
    b.decide(t0, 100.0, &window(160), true);
    let d = b.decide(t0 + S * 3, 90.0, &window(40), true);
    assert_eq!(d.action, hold(HoldReason::Cooldown));
    let d = b.decide(t0 + S * 6, 90.0, &window(40), true);
    assert_eq!(d.action, Action::Increase);
}

#[test]
fn worse_evidence_escalates_during_cooldown() {
    let mut a = aimd();
    let t0 = Instant::now();
    assert_eq!(a.decide(t0, 100.0, &window(160), true).rate, 96.5);
    // p99 grew 240 ms in a second: far past the deepest cut.
    let d = a.decide(t0 + S, 96.5, &window(400), true);
    assert_eq!((d.action, d.rate), (cut(Signal::Latency), 96.5 * 0.75));
    assert_eq!(a.reference_rate(), Some(100.0), "escalation keeps the knee");
    // An outage: the failure share climbs, each climb cuts again.
    let mut b = aimd();
    let mut rate = 120.0;
    for (i, share) in [0.1, 0.2, 0.3, 0.5, 0.7].into_iter().enumerate() {
        let d = b.decide(t0 + S * (i as u32), rate, &failing(share), true);
        assert_eq!(d.action, cut(Signal::Failures), "step {i}");
        rate = d.rate;
    }
    assert!((rate - 120.0 * 0.75_f64.powi(5)).abs() < 1e-9);
    assert_eq!(
        b.reference_rate(),
        None,
        "failures say nothing about capacity"
    );
}

#[test]
fn persistent_slowness_cuts_again_after_cooldown() {
    let mut a = aimd();
    let t0 = Instant::now();
    let mut rate = 100.0;
    let mut cuts = 0;
    for i in 0..=12u32 {
        let d = a.decide(t0 + S * i, rate, &window(160), true);
        if d.changed() {
            cuts += 1;
        }
        rate = d.rate;
    }
    assert_eq!(cuts, 3, "at 0 s, 6 s and 12 s");
    assert!((rate - 100.0 * 0.965_f64.powi(3)).abs() < 1e-9);
}

#[test]
fn falling_latency_above_target_holds() {
    let mut a = aimd();
    let t0 = Instant::now();
    let d = a.decide(t0, 100.0, &window(200), true);
    assert!((d.rate - 94.5).abs() < 1e-9, "{}", d.rate);
    for i in 1..6u32 {
        let d = a.decide(t0 + S * i, 94.5, &window(200), true);
        assert_eq!(d.action, hold(HoldReason::Cooldown));
    }
    // After the cooldown p99 is still above the target but fell 30 ms: the
    // downstream's queue is draining, no need to cut.
    let d = a.decide(t0 + S * 6, 94.5, &window(170), true);
    assert_eq!((d.rate, d.action), (94.5, hold(HoldReason::LatencyFalling)));
    // It stopped falling: the evidence stands, cut again.
    let d = a.decide(t0 + S * 7, 94.5, &window(168), true);
    assert_eq!(d.action, cut(Signal::Latency));
}

#[test]
fn a_queue_draining_too_slowly_is_cut_anyway() {
    // Default target 100 ms. 75/s sent, 78/s delivered, p99 flat at 1.2 s:
    // the queue drains 3/78 of a second of wait per second, about 29 s to
    // the target. Holding would keep the p99 high for half a minute.
    let slow = WindowSummary {
        throughput: 78.0,
        ..window(1200)
    };
    let d = aimd().decide(Instant::now(), 75.0, &slow, true);
    assert_eq!(d.action, cut(Signal::Latency), "{d:?}");
    assert!(d.rate < 75.0);
    // The same queue drained at 100/s sends 75: 0.25 s of wait shed per
    // second, under the target in about 4.4 s: held.
    let fast = WindowSummary {
        throughput: 100.0,
        ..slow
    };
    let d = aimd().decide(Instant::now(), 75.0, &fast, true);
    assert_eq!(d.action, hold(HoldReason::LatencyFalling));
    // A p99 falling 30 ms a second from 1.2 s (37 s to go) is cut too.
    let mut a = aimd();
    let t0 = Instant::now();
    a.decide(t0, 100.0, &window(1230), true);
    let d = a.decide(t0 + S * 7, 75.0, &window(1200), true);
    assert_eq!(d.action, cut(Signal::Latency), "{d:?}");
}

#[test]
fn rising_latency_holds_then_projection_cuts_before_target() {
    let mut a = aimd();
    let t0 = Instant::now();
    assert_eq!(
        a.decide(t0, 100.0, &window(40), true).action,
        Action::Increase
    );
    let d = a.decide(t0 + S, 110.0, &window(70), true);
    assert_eq!(d.action, hold(HoldReason::LatencyRising));
    // 120 ms, rising 50 ms/s: 170 ms projected at the next decision, a
    // queue growing 5 % a second: capacity 110 / 1.05, cut 3 % under it.
    let d = a.decide(t0 + S * 2, 110.0, &window(120), true);
    assert_eq!(d.action, cut(Signal::Latency));
    assert!((d.rate - 110.0 * 0.97 / 1.05).abs() < 1e-9, "{}", d.rate);
}

#[test]
fn start_up_steps_are_at_most_twelve_percent() {
    let mut a = aimd();
    let t0 = Instant::now();
    let mut rate = 20.0;
    for i in 0..40u32 {
        let d = a.decide(t0 + S * i, rate, &window(40), true);
        assert!(d.rate <= rate * 1.12 + 1e-9 && d.rate <= rate + 10.0 + 1e-9);
        rate = d.rate;
    }
    assert_eq!(rate, 200.0);
    let d = a.decide(t0 + S * 40, rate, &window(40), true);
    assert_eq!((d.rate, d.action), (200.0, hold(HoldReason::AtCeiling)));
}

#[test]
fn approaches_the_reference_slowly_then_probes() {
    let mut a = aimd();
    let t0 = Instant::now();
    a.decide(t0, 100.0, &window(160), true);
    assert_eq!(a.reference_rate(), Some(100.0));
    let mut rate = 90.0;
    let mut seen = Vec::new();
    for i in 6..16u32 {
        let d = a.decide(t0 + S * i, rate, &window(40), true);
        assert_eq!(d.action, Action::Increase);
        rate = d.rate;
        seen.push((rate * 100.0).round() / 100.0);
    }
    // Half the distance, at least 1/s, never past the reference; then
    // probes of 1 %, 2 %, 3 % ... of it.
    assert_eq!(
        seen,
        vec![
            95.0, 97.5, 98.75, 99.75, 100.0, 101.0, 103.0, 106.0, 110.0, 115.0
        ]
    );
}

#[test]
fn out_of_range_rates_are_clamped() {
    let t0 = Instant::now();
    for (input, want) in [
        (f64::NAN, 20.0),
        (f64::INFINITY, 20.0),
        (-5.0, 20.0),
        (5000.0, 200.0),
    ] {
        let d = aimd().decide(t0, input, &window(40), false);
        assert_eq!(d.rate, want, "{input}");
    }
}

#[test]
fn random_evidence_keeps_every_invariant() {
    let mut rng = fastrand::Rng::with_seed(42);
    let t0 = Instant::now();
    for _ in 0..200 {
        let mut a = aimd();
        let mut rate = rng.f64() * 250.0;
        let mut at = Duration::ZERO;
        for _ in 0..200 {
            at += ms(rng.u64(0..2500));
            let w = WindowSummary {
                samples: rng.u64(0..1000),
                p99: ms(rng.u64(0..600)),
                failures: rng.u64(0..20),
                congestion: u64::from(rng.u8(0..10) == 0),
                failure_share: rng.f64() * 0.1,
                retry_hint: rng.bool().then(|| ms(rng.u64(0..100_000))),
                ..WindowSummary::default()
            };
            let before = rate.clamp(20.0, 200.0);
            let d: Decision = a.decide(t0 + at, rate, &w, rng.bool());
            assert!((20.0..=200.0).contains(&d.rate), "{d:?}");
            assert!(d.pause.is_none_or(|p| p <= MAX_PAUSE));
            match d.action {
                Action::Increase => assert!(d.rate > before),
                Action::Decrease { .. } => {
                    assert!(before > 20.0 && d.rate < before && d.rate >= before * 0.75 - 1e-9)
                }
                Action::Hold { .. } => assert_eq!(d.rate, before),
            }
            rate = d.rate;
        }
    }
}

#[test]
fn extreme_intervals_and_growth_do_not_panic() {
    let t0 = Instant::now();
    let mut a = match AimdConfig::default()
        .with_interval(Duration::from_secs(u64::MAX / 4))
        .build()
    {
        Ok(a) => a,
        Err(e) => panic!("{e}"),
    };
    a.decide(t0, 100.0, &window(10), true);
    // Any later decision is too soon; nothing overflows.
    let d = a.decide(t0 + S, 100.0, &window(50_000), true);
    assert_eq!(d.action, hold(HoldReason::TooSoon));
    // A huge rise in one ordinary interval: the deepest cut, no panic.
    let mut b = aimd();
    b.decide(t0, 100.0, &window(1), true);
    let d = b.decide(t0 + S, 110.0, &window(59_000), true);
    assert_eq!((d.action, d.rate), (cut(Signal::Latency), 110.0 * 0.75));
}
