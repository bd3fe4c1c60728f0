//! One adaptive rate for a fleet (`RedisAimd`) against a real server: one
//! node decides from every node's samples (the fleet's p99, not an average
//! of theirs), the others follow; a congestion cut's pause reaches every
//! node; when the deciding node goes silent another takes over within the
//! lease and moves the rate by at most one step. Loopback, real time,
//! bounded; the controller's clock is given (no sleeps but the lease's
//! expiry, polled).

use crate::support;

use std::time::Duration;

use dripfeed::global::{RedisAimd, RedisConnection};
use dripfeed::rate::{Action, AimdConfig, HoldReason, Signal, Tally};
use support::redis::{RedisServer, available};
use tokio::time::Instant;

fn config() -> AimdConfig {
    AimdConfig::default()
        .with_floor(10.0)
        .with_ceiling(1000.0)
        .with_target_p99(Duration::from_millis(200))
}

/// `n` deliveries that each took `ms`, all started by a busy drain.
fn tally(n: u64, ms: u64) -> Tally {
    let mut t = Tally::default();
    for _ in 0..n {
        t.record(Duration::from_millis(ms));
    }
    t.worked = n;
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_decides_for_the_fleet_from_every_nodes_samples() {
    if !available("one_node_decides_for_the_fleet_from_every_nodes_samples") {
        return;
    }
    let redis = RedisServer::start();
    let conn = || RedisConnection::open(&redis.url()).expect("connect");
    let a = RedisAimd::new(conn(), "hooks", "a", config(), 100.0).expect("a");
    let b = RedisAimd::new(conn(), "hooks", "b", config(), 100.0).expect("b");
    let t0 = Instant::now();

    // a reports first and leads; b follows at the start rate.
    let first = a.report(t0, &Tally::default()).await.unwrap();
    assert!(first.leading);
    assert_eq!(first.rate, 100.0);
    let follower = b.report(t0, &tally(20, 900)).await.unwrap();
    assert!(!follower.leading && follower.decision.is_none());
    assert_eq!(follower.rate, 100.0);

    // a's own 980 samples are fast (its p99 10 ms); b's 20 are 900 ms. The
    // fleet's p99 is over all 1000: above the target, a latency cut.
    let second = t0 + Duration::from_secs(1);
    let cut = a.report(second, &tally(980, 10)).await.unwrap();
    let decision = cut.decision.expect("the leader decides");
    assert_eq!(
        decision.action,
        Action::Decrease {
            reason: Signal::Latency
        },
        "{decision:?}"
    );
    assert!(cut.rate < 100.0 && cut.rate >= 75.0, "{cut:?}");
    // Every node follows the rate the leader wrote.
    let seen = b.report(second, &Tally::default()).await.unwrap();
    assert_eq!(seen.rate, cut.rate);

    // A "slow down" with a Retry-After: a congestion cut with a pause every
    // node sees (the cooldown lets a clearly worse signal through).
    let mut slow_down = Tally::default();
    slow_down.record_congestion(Some(Duration::from_secs(2)));
    slow_down.worked = 1;
    b.report(second, &slow_down).await.unwrap();
    let third = t0 + Duration::from_secs(2);
    let paused = a.report(third, &Tally::default()).await.unwrap();
    let d = paused.decision.expect("decided");
    assert_eq!(
        d.action,
        Action::Decrease {
            reason: Signal::Congestion
        },
        "{d:?}"
    );
    let cut_at = std::time::Instant::now();
    let at_b = b.report(third, &Tally::default()).await.unwrap();
    let pause = at_b.pause.expect("every node pauses");
    assert!(
        pause > Duration::from_secs(1) && pause <= Duration::from_secs(2),
        "{at_b:?}"
    );
    let before = at_b.rate;

    // a goes silent: b takes the lease over once it expires (3 s), with a
    // controller resumed where a's left it: the congestion a cut for is
    // still in the window and within the cut's cooldown (6 s), so b does
    // not cut for it again.
    let started = std::time::Instant::now();
    let mut tick = 3u64;
    let took = loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "b never took over"
        );
        let s = b
            .report(t0 + Duration::from_secs(tick), &tally(50, 20))
            .await
            .unwrap();
        tick += 1;
        if s.leading {
            break s;
        }
        assert_eq!(s.rate, before, "nobody decides while a's lease lasts");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        took.rate >= before * 0.75 && took.rate <= before * 1.12 + 1e-9,
        "one step from {before}: {took:?}"
    );
    if cut_at.elapsed() < Duration::from_secs(5) {
        let d = took.decision.expect("the new leader decides");
        assert_eq!(
            (d.action, took.rate),
            (
                Action::Hold {
                    reason: HoldReason::Cooldown
                },
                before
            ),
            "{took:?}"
        );
    }
    // a, back, follows b now.
    let back = a
        .report(t0 + Duration::from_secs(tick), &Tally::default())
        .await
        .unwrap();
    assert!(!back.leading);
    assert_eq!(back.rate, took.rate);
    // b stops: it gives the lease back, and a leads at its next report.
    assert!(b.release().await.unwrap());
    let next = a
        .report(t0 + Duration::from_secs(tick + 1), &Tally::default())
        .await
        .unwrap();
    assert!(next.leading, "{next:?}");
    // A destination's view is a ring of eight seconds' hashes, the rate and
    // the lease: bounded, not a write per attempt.
    let keys = redis.cli(&["KEYS", "dripfeed:aimd:*"]);
    assert!(keys.lines().count() <= 10, "{keys}");
}
