//! Tenant quotas (`--tenant-rate 20 --tenant-burst 20`) in their three
//! stores: local, shared through Redis, shared through PostgreSQL. A tenant
//! flooding at 200/s gets 429 with Retry-After, five polite tenants at 5/s
//! are never refused; with two relays on one store the flooding tenant's
//! admissions across both stay within burst + rate × T (+ 2 %); while the
//! store is stopped (fail-closed) nobody gets a 429. Real time on loopback,
//! bounded in count and time; counts and generous bounds only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{Relay, TempDir, argv, eventually, http, owned};
use crate::receivers::{self, Log};
use crate::{support_postgres, support_redis};

const BURST: f64 = 20.0;
const RATE: f64 = 20.0;
const RUN: Duration = Duration::from_secs(3);

/// One relay delivering to `rx`, tenant quota 20/20, with `store` flags.
async fn relay(rx: SocketAddr, dir: &TempDir, store: &[&str]) -> Relay {
    let mut args = argv(&format!(
        "--drain-rate 1000 --latency-budget 1s --max-in-flight 64 --retries 0 \
         --no-journal --tenant-rate 20 --tenant-burst 20 --tenant-header x-tenant \
         --downstream http://{rx}/hooks --dead-letter-file {}",
        dir.arg(&format!("dl-{}.jsonl", fastrand::u32(..)))
    ));
    args.extend(owned(store));
    Relay::start_with(&args, &[]).await
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
    let client = http();
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

/// After the store comes back, a tenant is admitted again.
async fn recovers(variant: &str, relays: &[SocketAddr]) {
    let client = http();
    let url = format!("http://{}/v1/webhooks/deliver", relays[0]);
    let back = eventually(Duration::from_secs(10), || async {
        let resp = client
            .post(&url)
            .header("x-tenant", "after")
            .body("{}")
            .send()
            .await;
        resp.is_ok_and(|r| r.status().as_u16() == 202)
    })
    .await;
    assert!(back, "{variant}: admitted again once the store is back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_tenant_quotas() {
    let rx = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("tenants-local");
    let relay = relay(rx, &dir, &[]).await;
    let (seen, secs) = traffic(&[relay.addr], RUN).await;
    check_quota("local", &seen, secs);
}

/// Two relays whose tenant quotas live in one store (`store`: their
/// flags): the quota holds across both; with the store stopped
/// (`store_down(true)`) nobody gets a 429; restarted, the relays admit again.
async fn two_relays_sharing(variant: &str, store: &[&str], mut store_down: impl FnMut(bool)) {
    let rx = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new(&format!("tenants-{variant}"));
    let relays = [relay(rx, &dir, store).await, relay(rx, &dir, store).await];
    let addrs: Vec<SocketAddr> = relays.iter().map(|r| r.addr).collect();
    let (seen, secs) = traffic(&addrs, RUN).await;
    check_quota(variant, &seen, secs);
    store_down(true);
    let (seen, _) = traffic(&addrs, Duration::from_secs(1)).await;
    check_store_down(variant, &seen);
    store_down(false);
    recovers(variant, &addrs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_share_tenant_quotas_through_redis() {
    if !support_redis::available("two_relays_share_tenant_quotas_through_redis") {
        return;
    }
    let mut redis = support_redis::RedisServer::start();
    let url = redis.url();
    let store = ["--redis", url.as_str(), "--redis-failure", "closed"];
    two_relays_sharing("redis", &store, |down| {
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
    let url = pg.url();
    let store = ["--postgres", url.as_str(), "--postgres-failure", "closed"];
    two_relays_sharing("postgres", &store, |down| {
        if down { pg.stop() } else { pg.restart() }
    })
    .await;
}

/// With tenant quotas on, requests without a tenant, and with one that is
/// not readable, are one `default` tenant with the same quota (20/20): of
/// 60 sent at once of each kind, most are refused 429, never all admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_readable_tenant_share_the_default_quota() {
    let rx = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("tenants-default");
    let relay = relay(rx, &dir, &[]).await;
    let client = http();
    let unreadable = reqwest::header::HeaderValue::from_bytes(b"caf\xe9").expect("obs-text");
    for variant in ["no tenant", "unreadable tenant"] {
        let mut tasks = Vec::new();
        for _ in 0..60 {
            let mut req = client.post(relay.url("/v1/webhooks/deliver")).body("{}");
            if variant == "unreadable tenant" {
                req = req.header("x-tenant", unreadable.clone());
            }
            tasks.push(tokio::spawn(async move {
                req.send().await.map_or(0, |r| r.status().as_u16())
            }));
        }
        let mut statuses: HashMap<u16, u32> = HashMap::new();
        for t in tasks {
            *statuses.entry(t.await.unwrap_or(0)).or_default() += 1;
        }
        eprintln!("{variant}: {statuses:?}");
        let admitted = statuses.get(&202).copied().unwrap_or(0);
        let limited = statuses.get(&429).copied().unwrap_or(0);
        assert!(
            limited >= 20,
            "{variant}: refused past the default tenant's quota: {statuses:?}"
        );
        assert!(admitted <= 40, "{variant}: {statuses:?}");
    }
}
