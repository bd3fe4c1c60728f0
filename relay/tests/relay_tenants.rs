//! Tenant quotas in the webhook relay (`--tenant-rate 20 --tenant-burst 20`)
//! in its three variants: local, shared through Redis, shared through
//! PostgreSQL (the stores the relay's own flags open). A tenant flooding at
//! 200/s gets 429 with Retry-After, five polite tenants at 5/s are never
//! refused; with two relays on one store the flooding tenant's admissions
//! across both stay within burst + rate × T (+ 2 %); while the store is
//! stopped (fail-closed) nobody gets a 429. Real time on loopback, bounded in
//! count and time; counts and generous bounds only.

#[path = "../src/app.rs"]
#[allow(dead_code)]
mod app;
#[path = "../src/budget.rs"]
#[allow(dead_code)]
mod budget;
#[path = "../src/dead_letter.rs"]
#[allow(dead_code)]
mod dead_letter;
#[path = "../src/fanout.rs"]
#[allow(dead_code)]
mod fanout;
#[path = "../src/idempotency.rs"]
mod idempotency;
#[path = "../src/latency.rs"]
#[allow(dead_code)]
mod latency;
#[path = "../src/receiver.rs"]
#[allow(dead_code)]
mod receiver;
#[path = "../../tests/support/postgres.rs"]
mod support_postgres;
#[path = "../../tests/support/redis.rs"]
mod support_redis;
#[path = "../src/tenants.rs"]
#[allow(dead_code)]
mod tenants;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::{Relay, RelayConfig};
use dripfeed::Overflow;
use dripfeed::global::Failure;
use dripfeed::keyed::{BucketStore, Quota};

const BURST: f64 = 20.0;
const RATE: f64 = 20.0;
const RUN: Duration = Duration::from_secs(3);

/// One relay on a free port, tenant quota 20/20, its quotas in `store`
/// (shared) or local; returns its address and a stopper.
async fn relay(
    downstream: SocketAddr,
    store: Option<Arc<dyn BucketStore>>,
) -> (SocketAddr, Arc<tokio::sync::Notify>) {
    let dl = std::env::temp_dir().join(format!(
        "dripfeed-relay-tenants-{}-{}.jsonl",
        std::process::id(),
        fastrand::u64(..)
    ));
    let cfg = RelayConfig {
        drain_rate: 1000.0,
        latency_budget: Duration::from_secs(1),
        overflow: Overflow::TailDrop,
        dead_letter_file: dl,
        max_in_flight: 64,
        max_queue_bytes: 64 << 20,
        downstream: format!("http://{downstream}/hooks"),
        tenant_header: "x-tenant".into(),
        deliver_timeout: Duration::from_secs(5),
        adaptive: None,
        tenant_quota: Some(Quota::new(BURST, RATE).unwrap()),
        retry: None,
        journal: None,
        fanout: None,
    };
    let relay = Relay::start_with(cfg, None, store).await.unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let (addr, _server) = app::serve(
        "127.0.0.1:0".parse().unwrap(),
        app::router(relay, None),
        async move { s2.notified().await },
    )
    .await
    .unwrap();
    (addr, stop)
}

/// Statuses per tenant, and whether every 429 and 503 said when to retry.
#[derive(Default, Debug)]
struct Seen {
    statuses: HashMap<(String, u16), u64>,
    without_retry_after: u64,
    errors: u64,
}

impl Seen {
    fn count(&self, tenant: &str, status: u16) -> u64 {
        self.statuses
            .get(&(tenant.to_owned(), status))
            .copied()
            .unwrap_or(0)
    }
    fn total(&self, status: u16) -> u64 {
        self.statuses
            .iter()
            .filter(|((_, s), _)| *s == status)
            .map(|(_, n)| n)
            .sum()
    }
}

/// For `run`: "hot" sends 200/s and five polite tenants 5/s each, spread
/// over `relays` in turn. Returns what they saw and the seconds from the
/// first request sent to the last answer.
async fn traffic(relays: &[SocketAddr], run: Duration) -> (Seen, f64) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut n = 0usize;
    for t in 0..(run.as_millis() / 10) as usize {
        tick.tick().await;
        let mut senders = vec!["hot".to_owned(), "hot".to_owned()];
        // polite tenant i sends on ticks t ≡ 4i (mod 20): 5/s each
        if t % 4 == 0 {
            senders.push(format!("polite-{}", (t / 4) % 5));
        }
        for tenant in senders {
            let url = format!("http://{}/v1/webhooks/deliver", relays[n % relays.len()]);
            n += 1;
            let req = client
                .post(url)
                .header("content-type", "application/json")
                .header("x-tenant", tenant.clone())
                .body(format!("{{\"n\":{n}}}"));
            tasks.push(tokio::spawn(async move {
                let resp = req.send().await.ok()?;
                let waits = resp.headers().contains_key("retry-after");
                Some((tenant, resp.status().as_u16(), waits))
            }));
        }
    }
    let mut seen = Seen::default();
    for task in tasks {
        match task.await.ok().flatten() {
            Some((tenant, status, waits)) => {
                *seen.statuses.entry((tenant, status)).or_default() += 1;
                if matches!(status, 429 | 503) && !waits {
                    seen.without_retry_after += 1;
                }
            }
            None => seen.errors += 1,
        }
    }
    (seen, started.elapsed().as_secs_f64())
}

/// The quota holds: the hot tenant is refused with Retry-After, polite
/// tenants never are, and the hot tenant's admissions across every relay
/// stay within burst + rate × T (+ 2 %).
fn check_quota(variant: &str, seen: &Seen, secs: f64) {
    eprintln!("{variant}: {secs:.2} s, {seen:?}");
    assert_eq!(seen.errors, 0, "{variant}: connection errors");
    assert_eq!(seen.without_retry_after, 0, "{variant}: refusals say when");
    let hot = seen.count("hot", 202);
    let bound = (BURST + RATE * secs) * 1.02;
    assert!(
        hot as f64 <= bound,
        "{variant}: hot admitted {hot} > {bound:.1}"
    );
    assert!(
        hot as f64 >= 0.7 * (BURST + RATE * RUN.as_secs_f64()),
        "{variant}: the hot tenant still gets its quota: {hot}"
    );
    assert!(
        seen.count("hot", 429) > 300,
        "{variant}: the flood is refused"
    );
    for i in 0..5 {
        let polite = format!("polite-{i}");
        assert_eq!(seen.count(&polite, 429), 0, "{variant}: {polite} refused");
        assert_eq!(seen.count(&polite, 503), 0, "{variant}: {polite} refused");
        assert!(seen.count(&polite, 202) >= 10, "{variant}: {polite} sent");
    }
}

/// While the store is down (fail-closed) nobody gets a 429: 503s, each with
/// Retry-After.
fn check_store_down(variant: &str, seen: &Seen) {
    eprintln!("{variant}, store stopped: {seen:?}");
    assert_eq!(
        seen.total(429),
        0,
        "{variant}: a 429 while the store was down"
    );
    assert!(seen.total(503) > 0, "{variant}: refused as unavailable");
    assert_eq!(seen.without_retry_after, 0);
}

/// After the store comes back, a polite tenant is admitted again.
async fn recovers(variant: &str, relays: &[SocketAddr]) {
    let client = reqwest::Client::new();
    let start = Instant::now();
    loop {
        let ok = client
            .post(format!("http://{}/v1/webhooks/deliver", relays[0]))
            .header("x-tenant", "after")
            .body("{}")
            .send()
            .await
            .is_ok_and(|r| r.status().as_u16() == 202);
        if ok {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{variant}: recovered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn receiver() -> SocketAddr {
    let rx = receiver::Receiver::new(100_000.0);
    receiver::serve("127.0.0.1:0".parse().unwrap(), rx)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_tenant_quotas() {
    let rx = receiver().await;
    let (addr, stop) = relay(rx, None).await;
    let (seen, secs) = traffic(&[addr], RUN).await;
    check_quota("local", &seen, secs);
    stop.notify_one();
}

/// Two relays whose tenant quotas live in one store (`stores`: a handle
/// each): the quota holds across both; with the store stopped
/// (`store_down(true)`) nobody gets a 429; restarted (`store_down(false)`),
/// the relays admit again.
async fn two_relays_sharing(
    variant: &str,
    rx: SocketAddr,
    stores: [Arc<dyn BucketStore>; 2],
    mut store_down: impl FnMut(bool),
) {
    let mut relays = Vec::new();
    for store in stores {
        relays.push(relay(rx, Some(store)).await);
    }
    let addrs: Vec<SocketAddr> = relays.iter().map(|r| r.0).collect();
    let (seen, secs) = traffic(&addrs, RUN).await;
    check_quota(variant, &seen, secs);

    store_down(true);
    let (seen, _) = traffic(&addrs, Duration::from_secs(1)).await;
    check_store_down(variant, &seen);
    store_down(false);
    recovers(variant, &addrs).await;
    for (_, stop) in relays {
        stop.notify_one();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_share_tenant_quotas_through_redis() {
    if !support_redis::available("two_relays_share_tenant_quotas_through_redis") {
        return;
    }
    let mut redis = support_redis::RedisServer::start();
    let quota = Quota::new(BURST, RATE).unwrap();
    let url = redis.url();
    let store = || tenants::open_redis(&url, quota, Failure::FailClosed).unwrap();
    two_relays_sharing("redis", receiver().await, [store(), store()], |down| {
        if down { redis.kill() } else { redis.restart() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_share_tenant_quotas_through_postgres() {
    if !support_postgres::available("two_relays_share_tenant_quotas_through_postgres") {
        return;
    }
    let mut pg = support_postgres::PgServer::start();
    let quota = Quota::new(BURST, RATE).unwrap();
    let url = pg.url();
    let store = || tenants::open_postgres(&url, quota, Failure::FailClosed);
    let stores = [store().await.unwrap(), store().await.unwrap()];
    two_relays_sharing("postgres", receiver().await, stores, |down| {
        if down { pg.stop() } else { pg.restart() }
    })
    .await;
}
