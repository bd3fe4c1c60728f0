//! `queue = redis` as a fleet: three relays, two destinations, one Redis
//! that fsyncs every write (or a three-node Redis Cluster). A burst is
//! posted across all three; mid-burst one relay is SIGKILLed and never
//! restarted (or Redis is stopped for five seconds and restarted on its
//! append-only file). Every webhook any relay answered 202, the dead one's
//! included, reaches its receiver; duplicates stay within what the dead
//! relay had in flight; no second of arrivals exceeds 1.1 × the fleet rate
//! plus one lease (and two arrivals of slack for the receiver's own
//! stalls); the fleet's depth never passes its bound; and an
//! idempotent retry posted to another relay names the first id. While
//! Redis is down, a destination's live state shows the last counts read.

#![cfg(feature = "redis")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dripfeed::global::RedisConnection;

use crate::harness::{Relay, TempDir, argv, http};
use crate::receivers::{self, Log};
use crate::support_redis::{self, RedisCluster, RedisServer};

/// Each destination's rate, for the fleet together (webhooks/s).
const RATE: f64 = 20.0;
/// The fleet's bound per destination: latency budget (2 s) × rate.
const BOUND: u64 = 40;
/// Deliveries one relay has under way per destination at most.
const IN_FLIGHT: u64 = 4;
/// The destinations.
const DESTINATIONS: [&str; 2] = ["a", "b"];

/// Where the fleet's queues live.
enum Store {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl Store {
    /// The relays' `--redis`.
    fn url(&self) -> String {
        match self {
            Store::Single(s) => s.url(),
            Store::Cluster(c) => c.urls().join(","),
        }
    }

    async fn connection(&self) -> RedisConnection {
        match self {
            Store::Single(s) => RedisConnection::open(&s.url()).expect("a redis URL"),
            Store::Cluster(c) => {
                let urls = c.urls();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                RedisConnection::cluster(&urls).await.expect("the cluster")
            }
        }
    }
}

/// What goes wrong mid-burst.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The third relay is SIGKILLed and never restarted.
    KillARelay,
    /// Redis is SIGKILLed, down five seconds, restarted on its AOF.
    RestartRedis,
}

/// What the posters saw: per destination, the ids answered 202.
#[derive(Default)]
struct Posted {
    ids: Mutex<HashMap<&'static str, Vec<String>>>,
    refused: AtomicU64,
}

/// Posts to `url` every `gap` until `stop`, alternating destinations;
/// a relay that no longer answers ends it.
async fn poster(url: String, posted: Arc<Posted>, gap: Duration, stop: Arc<AtomicBool>) {
    let client = http();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let to = DESTINATIONS[n % 2];
        n += 1;
        let sent = client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-destination", to)
            .body(format!("{{\"n\":{n}}}"))
            .send()
            .await;
        let Ok(resp) = sent else { return };
        let status = resp.status().as_u16();
        let body: serde_json::Value =
            serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
        match (status, body["id"].as_str()) {
            (202, Some(id)) => posted
                .ids
                .lock()
                .unwrap()
                .entry(to)
                .or_default()
                .push(id.to_owned()),
            (503, _) if body["type"] == "urn:dripfeed:problem:overloaded" => {
                posted.refused.fetch_add(1, Ordering::Relaxed);
            }
            (503, _) => {} // Redis restarting: unavailable
            (other, _) => panic!("a relay answered {other}: {body}"),
        }
        tokio::time::sleep(gap).await;
    }
}

/// The most arrivals in any one second (a window starting at each one).
fn busiest_second(mut at: Vec<Instant>) -> usize {
    at.sort();
    (0..at.len())
        .map(|i| at[i..].partition_point(|t| *t < at[i] + Duration::from_secs(1)))
        .max()
        .unwrap_or(0)
}

async fn fleet(store: &mut Store, fault: Fault) {
    let log = Arc::new(Log::default());
    // Each delivery takes 300 ms: every relay has some under way when one
    // is killed.
    let rx = receivers::ok(log.clone(), Duration::from_millis(300)).await;
    let dir = TempDir::new("shared-fleet");
    let url = store.url();
    let node = |i: usize| {
        argv(&format!(
            "--queue redis --redis {url} --node-name n{i} \
             --destination a=http://{rx}/a?d=a --destination b=http://{rx}/b?d=b \
             --drain-rate {RATE} --latency-budget 2s --deliver-timeout 5s --retries 3 \
             --retry-min 200ms --max-in-flight-per-destination {IN_FLIGHT} \
             --journal-dir {} --dead-letter-file {}",
            dir.arg(&format!("journal-{i}")),
            dir.arg(&format!("dl-{i}.jsonl")),
        ))
    };
    let mut relays = Vec::new();
    for i in 0..3 {
        relays.push(Relay::start_with(&node(i), &[]).await);
    }
    // The fleet's depth, sampled while it runs.
    let conn = store.connection().await;
    // A destination's queue in Redis: its stream and its retries (the keys
    // the relay's fleet engine names them by).
    let queues: Vec<(String, String)> = DESTINATIONS
        .iter()
        .map(|d| {
            (
                format!("dripfeed:q:{{{d}}}:s"),
                format!("dripfeed:q:{{{d}}}:r"),
            )
        })
        .collect();
    let deepest = Arc::new(Mutex::new([0u64; 2]));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (deepest, sampling) = (deepest.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                for (i, (stream, retries)) in queues.iter().enumerate() {
                    let mut c = conn.clone();
                    let mut pipe = redis::pipe();
                    pipe.cmd("XLEN").arg(stream).cmd("ZCARD").arg(retries);
                    let depth: redis::RedisResult<(u64, u64)> = pipe.query_async(&mut c).await;
                    if let Ok(d) = depth.map(|(queued, waiting)| queued + waiting) {
                        let mut most = deepest.lock().unwrap();
                        most[i] = most[i].max(d);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // The burst: about 3 × 40 = 120 posts/s offered, 2 × 20 delivered.
    let posted = Arc::new(Posted::default());
    let stop = Arc::new(AtomicBool::new(false));
    let posters: Vec<_> = relays
        .iter()
        .map(|r| {
            let url = r.url("/v1/webhooks/deliver");
            tokio::spawn(poster(
                url,
                posted.clone(),
                Duration::from_millis(25),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    match fault {
        Fault::KillARelay => relays[2].kill().await,
        Fault::RestartRedis => {
            let Store::Single(redis) = store else {
                unreachable!("a single server is restarted")
            };
            // What the fleet accepted of `a`, as relay 0's admin API says.
            let accepted = |r: &Relay| {
                let url = r.admin_url("/v1/destinations/a");
                async move {
                    let body = http().get(&url).send().await.expect("admin").text().await;
                    let v: serde_json::Value =
                        serde_json::from_str(&body.unwrap_or_default()).unwrap_or_default();
                    v["live"]["accepted"].as_u64().unwrap_or(0)
                }
            };
            let before = accepted(&relays[0]).await;
            assert!(before > 0, "the burst was taken");
            redis.kill();
            tokio::time::sleep(Duration::from_secs(2)).await;
            // While Redis is down a destination's state is the last known,
            // not zeros (it showed 0 accepted).
            let during = accepted(&relays[0]).await;
            assert!(during >= before, "{during} accepted shown, {before} before");
            tokio::time::sleep(Duration::from_secs(3)).await;
            tokio::task::block_in_place(|| redis.restart());
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An idempotent retry posted to another relay names the first id.
    let keyed = |r: &Relay| {
        let url = r.url("/v1/webhooks/deliver");
        async move {
            for _ in 0..300 {
                let resp = http()
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-destination", "a")
                    .header("idempotency-key", "order-7")
                    .body("{\"order\":7}")
                    .send()
                    .await
                    .expect("a live relay answers");
                let status = resp.status().as_u16();
                let body: serde_json::Value =
                    serde_json::from_str(&resp.text().await.unwrap_or_default())
                        .unwrap_or_default();
                if status == 202 {
                    return body;
                }
                assert_eq!(status, 503, "{body}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("no room in 30 s");
        }
    };
    let first = keyed(&relays[0]).await;
    let again = keyed(&relays[1]).await;
    assert_eq!(first["status"], "queued", "{first}");
    assert_eq!(again["status"], "duplicate", "{again}");
    assert_eq!(first["id"], again["id"]);
    stop.store(true, Ordering::Relaxed);
    for p in posters {
        p.await.expect("a poster");
    }
    let mut ids = posted.ids.lock().unwrap().clone();
    ids.entry("a")
        .or_default()
        .push(first["id"].as_str().unwrap_or_default().to_owned());
    let total: usize = ids.values().map(Vec::len).sum();
    assert!(total > 100, "a burst was taken: {total}");
    assert!(
        posted.refused.load(Ordering::Relaxed) > 0,
        "the burst was more than the fleet's bound (some 503 overloaded)"
    );
    // Every 202 reaches its receiver, the dead relay's included.
    let delivered = log
        .until(Duration::from_secs(60), |hits| {
            let seen: std::collections::HashSet<&str> =
                hits.iter().map(|h| h.key.as_str()).collect();
            ids.values().flatten().all(|id| seen.contains(id.as_str()))
        })
        .await;
    sampling.store(false, Ordering::Relaxed);
    sampler.await.expect("the sampler");
    let keys = log.keys();
    let missing: Vec<&String> = ids
        .values()
        .flatten()
        .filter(|id| !keys.contains_key(*id))
        .collect();
    assert!(
        delivered,
        "{} of {total} 202s never delivered: {missing:?}",
        missing.len()
    );
    // Any relay answers for any webhook (the dead one's included): each
    // 202's status, asked of the first relay, says delivered.
    let mut unsettled: Vec<&String> = ids.values().flatten().collect();
    let until = Instant::now() + Duration::from_secs(20);
    let mut last = serde_json::Value::Null;
    while !unsettled.is_empty() && Instant::now() < until {
        let mut still = Vec::new();
        for id in unsettled {
            let resp = http()
                .get(relays[0].url(&format!("/v1/webhooks/{id}")))
                .send()
                .await
                .expect("the relay answers");
            let body: serde_json::Value =
                serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
            if body["state"] != "delivered" || body["attempts"].as_u64().unwrap_or(0) < 1 {
                last = body;
                still.push(id);
            }
        }
        unsettled = still;
        if !unsettled.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert!(
        unsettled.is_empty(),
        "{} statuses not delivered, e.g. {last}",
        unsettled.len()
    );
    // Duplicates: at most what the dead relay (or, with Redis restarted,
    // every relay) had under way.
    let twice: u64 = keys.values().map(|n| u64::from(n - 1)).sum();
    let mut retried = 0.0;
    for r in relays
        .iter()
        .take(if fault == Fault::KillARelay { 2 } else { 3 })
    {
        retried += r
            .metrics()
            .await
            .find("leaky_bucket_retries_total", &[])
            .unwrap_or(0.0);
    }
    if twice > 0 {
        eprintln!("{retried} retries (a delivery slower than the deliver timeout is tried again)");
        let t0 = log.hits().first().map(|h| h.at);
        for (k, n) in keys.iter().filter(|(_, n)| **n > 1) {
            let at: Vec<u128> = log
                .hits()
                .iter()
                .filter(|h| &h.key == k)
                .map(|h| (h.at - t0.unwrap_or(h.at)).as_millis())
                .collect();
            eprintln!("{k} delivered {n} times, at {at:?} ms");
        }
    }
    let holders = if fault == Fault::KillARelay { 1 } else { 3 };
    assert!(
        twice <= holders * IN_FLIGHT * 2,
        "{twice} duplicates, more than {holders} relay(s) had in flight"
    );
    // The receiver never sees more than 1.1 × the rate + one lease (1) in
    // any second, per destination; the depth never passes the bound. When
    // Redis comes back, each of the three relays takes its first lease at
    // once (seen in CI: 24 in the second after the restart, for 23): one
    // lease per relay then. Plus two for the receiver's own stalls on a
    // busy machine: it records arrivals it was too busy to take as they
    // came all at once (seen in CI: none for 265 ms, then four within 2 ms,
    // 24 in a second). Three relays each at the rate without the shared
    // limit would give 60.
    let leases = match fault {
        Fault::KillARelay => 1.0,
        Fault::RestartRedis => 3.0,
    } + 2.0;
    for d in DESTINATIONS {
        let at: Vec<Instant> = log
            .hits()
            .iter()
            .filter(|h| h.query == format!("d={d}"))
            .map(|h| h.at)
            .collect();
        let busiest = busiest_second(at.clone());
        if busiest as f64 > 1.1 * RATE + leases {
            let mut at = at;
            at.sort();
            let t0 = at[0];
            let ms: Vec<u128> = at.iter().map(|t| (*t - t0).as_millis()).collect();
            eprintln!("{d} arrivals (ms): {ms:?}");
        }
        assert!(
            busiest as f64 <= 1.1 * RATE + leases,
            "{d}: {busiest} deliveries in one second, for a fleet rate of {RATE}"
        );
    }
    let deepest = *deepest.lock().unwrap();
    assert!(
        deepest.iter().all(|d| *d <= BOUND) && deepest.iter().any(|d| *d >= BOUND / 2),
        "the fleet's depth, at most {deepest:?}, stays within {BOUND} (and fills)"
    );
    if fault == Fault::KillARelay {
        let took_over = relays[..2]
            .iter()
            .flat_map(|r| r.err.all())
            .filter(|l| l.contains("took over a webhook a relay left pending"))
            .count();
        assert!(
            took_over > 0,
            "the live relays took over the dead one's webhooks"
        );
    }
    // Nothing dead-lettered: every webhook was delivered.
    for i in 0..3 {
        let dead = std::fs::read_to_string(dir.join(&format!("dl-{i}.jsonl"))).unwrap_or_default();
        assert_eq!(dead.lines().count(), 0, "relay {i} dead-lettered: {dead}");
    }
    eprintln!(
        "fleet: {total} taken, {} refused, {twice} duplicates, deepest {deepest:?}",
        posted.refused.load(Ordering::Relaxed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_that_loses_a_relay_delivers_every_202() {
    if !support_redis::available("a_fleet_that_loses_a_relay_delivers_every_202") {
        return;
    }
    fleet(
        &mut Store::Single(RedisServer::start_durable()),
        Fault::KillARelay,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_whose_redis_restarts_on_its_aof_loses_nothing() {
    if !support_redis::available("a_fleet_whose_redis_restarts_on_its_aof_loses_nothing") {
        return;
    }
    fleet(
        &mut Store::Single(RedisServer::start_durable()),
        Fault::RestartRedis,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_a_redis_cluster_that_loses_a_relay_delivers_every_202() {
    if !support_redis::available("a_fleet_on_a_redis_cluster_that_loses_a_relay_delivers_every_202")
    {
        return;
    }
    fleet(
        &mut Store::Cluster(RedisCluster::start()),
        Fault::KillARelay,
    )
    .await;
}
