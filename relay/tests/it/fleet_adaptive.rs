//! `--adaptive` with the fleet's queue: one rate per destination for every
//! relay, decided from every relay's measurements. A fragile receiver (4
//! workers, 50 ms a request: capacity C = 80/s, its latency growing with
//! its backlog) is flooded at 2.5 C for 60 s through one relay and through
//! three, each fleet starting at 2 C. Over the last 15 s the receiver serves at least
//! 0.62 of what it serves flat out on the machine now (at most C), its p99
//! from arrival to answer stays within 4 × the target (far below what the same
//! fleet at a fixed 2 C makes it, run beside it), and the fleet's rate
//! stays within [0.45 × that, 1.3 C]; the same when the relay deciding the
//! rate is SIGKILLed at 20 s. (AIMD saws: a cut to 0.75 of the rate, a
//! second within the cooldown when the latency is still rising, a hold
//! while the backlog drains, then a climb of 10/s a second. A 15 s window
//! holds about one tooth, so its mean depends on where the tooth falls:
//! 0.82 to 0.9 of the capacity in CI on a loaded machine, the rate as low
//! as 0.69 of it after a double cut; on one 2-core machine, runs of the
//! same code served 0.65 to 0.74 of it over the tail, 0.54 to 0.6 while
//! finding it, the rate dipping to 0.46, in half the runs: the bands sit
//! below those. What the bounds still refuse: a rate
//! that collapses toward the floor, or one that never cuts, which the p99
//! beside the fixed fleet's refuses too.) The flood lasts 60 s so the last 15 s begin 25 s after
//! the kill: on a busy machine a fleet of three cut its rate twice while the
//! receiver worked off the backlog of its first seconds at 2 C (192
//! deliveries in flight: 160/s to 48/s, then 36/s), and its additive
//! recovery reached C only at 37 s, inside a tail that began at 30 s when
//! the flood lasted 45 s. Real time, bounded; counts per
//! second with generous bands, no tight timing. It needs the machine's
//! cores for itself (ten relays and their load): `scripts/test.sh` runs it
//! alone, after the other tests.

#![cfg(feature = "redis")]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use tokio::sync::Semaphore;

use crate::harness::{Relay, TempDir, argv, http};
use crate::load::burst;
use crate::receivers::serve;
use crate::support_redis::{self, RedisServer};

/// The receiver's workers and the time each request takes.
const WORKERS: usize = 4;
const SERVICE: Duration = Duration::from_millis(50);
/// Its capacity, requests per second.
const C: f64 = WORKERS as f64 * 1000.0 / 50.0;
/// The p99 the fleet aims under.
const TARGET_MS: u64 = 250;
/// How long the flood lasts, and the measured tail of it.
const FLOOD: Duration = Duration::from_secs(60);
const TAIL: Duration = Duration::from_secs(15);

/// Each request's answer: when it was answered and how long it waited and
/// was served (arrival to answer).
#[derive(Default)]
struct Served(Mutex<Vec<(Instant, Duration)>>);

/// A receiver with `WORKERS` workers, each request taking `SERVICE`; the
/// rest wait in its backlog.
async fn fragile(served: Arc<Served>) -> SocketAddr {
    let workers = Arc::new(Semaphore::new(WORKERS));
    let app = Router::new().fallback(move || {
        let (workers, served) = (workers.clone(), served.clone());
        async move {
            let arrived = Instant::now();
            let Ok(_worker) = workers.acquire().await else {
                return StatusCode::SERVICE_UNAVAILABLE;
            };
            tokio::time::sleep(SERVICE).await;
            let now = Instant::now();
            served.0.lock().unwrap().push((now, now - arrived));
            StatusCode::NO_CONTENT
        }
    });
    serve(app).await
}

/// What one fleet showed over the tail.
#[derive(Debug)]
struct Tail {
    /// Served per second: mean, min, max.
    mean: f64,
    min: usize,
    max: usize,
    /// The receiver's p99, arrival to answer.
    p99: Duration,
    /// Served per second from 5 s to 20 s (before the kill, if any): mean,
    /// min, max.
    before: (f64, usize, usize),
    /// The fleet's rate as the relays reported it each second: min, max.
    rate: (f64, f64),
    /// Relays that held the lease at the end (`sum()` of the gauge).
    leaders: f64,
    /// Round trips per second the fleet's view cost the relays alive at
    /// the end, over their life.
    view_trips: f64,
}

/// What the receiver served from `from` for `len`: per second the mean,
/// min and max, and the p99 from arrival to answer.
fn window(
    served: &[(Instant, Duration)],
    from: Instant,
    len: Duration,
) -> (f64, usize, usize, Duration) {
    let seen: Vec<&(Instant, Duration)> = served
        .iter()
        .filter(|(at, _)| *at >= from && *at < from + len)
        .collect();
    let mut per_second = vec![0usize; len.as_secs() as usize];
    for (at, _) in &seen {
        if let Some(n) = per_second.get_mut((*at - from).as_secs() as usize) {
            *n += 1;
        }
    }
    let mut waits: Vec<Duration> = seen.iter().map(|(_, w)| *w).collect();
    waits.sort();
    let p99 = waits
        .get((waits.len() * 99 / 100).min(waits.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    (
        seen.len() as f64 / len.as_secs_f64(),
        per_second.iter().copied().min().unwrap_or(0),
        per_second.iter().copied().max().unwrap_or(0),
        p99,
    )
}

/// The leader gauge of `name` on `relay` (0 when it cannot be read).
async fn leading(relay: &Relay) -> f64 {
    relay
        .metrics()
        .await
        .find(
            "dripfeed_relay_fleet_rate_leader",
            &[("destination", "hooks")],
        )
        .unwrap_or(0.0)
}

/// The fleet's rate for the destination as `relay` knows it, checking that
/// the bound follows it (latency budget, 2 s, × the rate).
async fn rate_on(relay: &Relay) -> Option<f64> {
    let url = relay.admin_url("/v1/destinations/hooks");
    let text = http().get(url).send().await.ok()?.text().await.ok()?;
    let body: serde_json::Value = serde_json::from_str(&text).ok()?;
    let rate = body["live"]["rate_now"].as_f64()?;
    let bound = body["live"]["capacity"].as_f64()?;
    assert_eq!(
        bound,
        (2.0 * rate).ceil(),
        "the bound follows the rate: {body}"
    );
    Some(rate)
}

/// `n` relays on their own Redis, adaptive or at a fixed 2 C, flooded at
/// 2.5 C for 60 s; with `kill`, the relay deciding the rate is SIGKILLed
/// at 20 s.
async fn fleet(tag: &str, n: usize, adaptive: bool, kill: bool) -> Tail {
    let redis = RedisServer::start();
    let served = Arc::new(Served::default());
    let rx = fragile(served.clone()).await;
    let dir = TempDir::new(&format!("fleet-aimd-{tag}"));
    let mode = match adaptive {
        true => format!("--adaptive --floor 10 --ceiling 400 --target-p99 {TARGET_MS}ms"),
        false => String::new(),
    };
    let line = |i: usize| {
        argv(&format!(
            "--queue redis --redis {} --node-name {tag}{i} --destination hooks=http://{rx}/hooks \
             --drain-rate {} --latency-budget 2s --deliver-timeout 10s --retries 0 \
             --max-in-flight-per-destination 64 {mode} \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            2.0 * C,
            dir.arg(&format!("journal-{i}")),
            dir.arg(&format!("dl-{i}.jsonl")),
        ))
    };
    let mut relays = Vec::new();
    for i in 0..n {
        relays.push(Relay::start_with(&line(i), &[]).await);
    }
    let start = Instant::now();
    let per_relay = (2.5 * C / n as f64).ceil() as u32;
    let floods: Vec<_> = relays
        .iter()
        .map(|r| {
            let addr = r.addr;
            tokio::spawn(async move {
                burst(addr, per_relay, FLOOD.as_secs() as u32, |_| Vec::new()).await
            })
        })
        .collect();
    // The fleet's rate each second of the tail, from the relays alive.
    let mut killed = None;
    let mut rates = Vec::new();
    let mut seen = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while start.elapsed() < FLOOD {
        tick.tick().await;
        if kill && killed.is_none() && start.elapsed() >= Duration::from_secs(20) {
            for (i, r) in relays.iter().enumerate() {
                if leading(r).await == 1.0 {
                    killed = Some(i);
                }
            }
            let i = killed.expect("a relay decides the rate");
            relays[i].kill().await;
        }
        // One relay's rate every second (shown on failure), every live
        // relay's in the tail.
        let tail = start.elapsed() >= FLOOD - TAIL;
        let live: Vec<&Relay> = relays
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != killed)
            .map(|(_, r)| r)
            .collect();
        let mut now = Vec::new();
        for r in live.iter().take(if tail { live.len() } else { 1 }) {
            if let Some(rate) = rate_on(r).await {
                now.push(rate);
            }
        }
        seen.push((
            start.elapsed().as_secs(),
            now.first().copied().unwrap_or(0.0) as u32,
        ));
        if tail {
            rates.extend(now);
        }
    }
    for f in floods {
        let _ = f.await;
    }
    let (mut leaders, mut trips) = (0.0, 0.0);
    for (i, r) in relays.iter().enumerate() {
        if Some(i) != killed {
            leaders += leading(r).await;
            trips += r
                .metrics()
                .await
                .find("dripfeed_redis_round_trips_total", &[("purpose", "aimd")])
                .unwrap_or(0.0);
        }
    }
    let view_trips = trips / start.elapsed().as_secs_f64();
    eprintln!("{tag}: {seen:?}");
    let served = served.0.lock().unwrap().clone();
    let last = window(&served, start + FLOOD - TAIL, TAIL);
    let before = window(&served, start + Duration::from_secs(5), TAIL);
    drop(redis);
    Tail {
        mean: last.0,
        min: last.1,
        max: last.2,
        p99: last.3,
        before: (before.0, before.1, before.2),
        rate: (
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        ),
        leaders,
        view_trips,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_adapts_one_rate_to_a_fragile_receiver() {
    if !support_redis::available("a_fleet_adapts_one_rate_to_a_fragile_receiver") {
        return;
    }
    let (one, steady, killed, fixed) = tokio::join!(
        fleet("one", 1, true, false),
        fleet("steady", 3, true, false),
        fleet("killed", 3, true, true),
        fleet("fixed", 3, false, false),
    );
    eprintln!(
        "capacity {C}/s; over the last 15 s:\n one adaptive relay: {one:?}\n three: {steady:?}\n \
         three, the deciding one killed at 20 s: {killed:?}\n three at a fixed 2 C: {fixed:?}"
    );
    let target = Duration::from_millis(TARGET_MS);
    // What the receiver serves flat out on this machine now (the fixed
    // fleet keeps it saturated): C, or less on a machine this busy.
    let capacity = C.min(fixed.mean);
    for (what, t, least) in [
        ("one relay", &one, 0.62),
        ("three relays", &steady, 0.62),
        ("after the kill", &killed, 0.62),
    ] {
        assert!(
            t.mean >= least * capacity,
            "{what}: served {:.1}/s over the last 15 s; capacity {capacity:.1}",
            t.mean
        );
        // While it finds the capacity from 2 C (5 s to 20 s) the receiver
        // is kept busy too.
        assert!(
            t.before.0 >= 0.5 * capacity,
            "{what}: served {:.1}/s from 5 s to 20 s; capacity {capacity:.1}",
            t.before.0
        );
        assert!(
            t.min as f64 >= 0.4 * capacity && t.max as f64 <= 1.2 * C,
            "{what}: seconds served {}..{}",
            t.min,
            t.max
        );
        // (Up to 754 ms seen in CI over a tail whose tooth climbed past C.)
        assert!(
            t.p99 <= target * 4,
            "{what}: the receiver's p99 {:?}, target {target:?}",
            t.p99
        );
        // Around what the receiver serves now, as the served rate is
        // judged: the fleet can only find the capacity the receiver has.
        assert!(
            t.rate.0 >= 0.45 * capacity && t.rate.1 <= 1.3 * C,
            "{what}: the fleet's rate ranged {:?}, capacity {capacity:.1} (nominal {C})",
            t.rate
        );
        assert!(
            t.p99 * 3 < fixed.p99,
            "{what}: p99 {:?} not far below a fixed rate's {:?}",
            t.p99,
            fixed.p99
        );
        assert_eq!(t.leaders, 1.0, "{what}: one relay decides");
        assert!(
            t.view_trips <= 2.0 * 3.0 + 1.0,
            "{what}: the fleet's view cost {:.1} round trips/s",
            t.view_trips
        );
    }
}
