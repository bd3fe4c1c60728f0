//! The relay fanning out on loopback, in real time, bounded in time and
//! count: three receivers (healthy, slow at 20/s, dead: takes the
//! connection and never answers), each flooded at 40/s for 15 s; and signed
//! deliveries checked against the Standard Webhooks scheme written here
//! from the spec (HMAC-SHA256 built from SHA-256, not the relay's signer).

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
#[path = "../src/fanout_demo.rs"]
#[allow(dead_code)]
mod fanout_demo;
#[path = "../src/idempotency.rs"]
#[allow(dead_code)]
mod idempotency;
#[path = "../src/latency.rs"]
#[allow(dead_code)]
mod latency;
#[path = "../src/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::{Relay, RelayConfig};
use base64::Engine;
use dripfeed::destinations::{BreakerConfig, BreakerState};
use dripfeed::{Overflow, RetryPolicy};
use fanout::{Endpoint, FanoutConfig};
use sha2::{Digest, Sha256};

fn endpoint(name: &str, url: &str, rate: f64, secret: Option<&str>) -> Endpoint {
    Endpoint {
        name: name.into(),
        url: url.into(),
        rate: Some(rate),
        ceiling: Some(rate),
        budget: None,
        secret: secret.map(str::to_owned),
    }
}

fn config(dir: &std::path::Path, endpoints: Vec<Endpoint>) -> RelayConfig {
    RelayConfig {
        drain_rate: 100.0,
        latency_budget: Duration::from_secs(2),
        overflow: Overflow::TailDrop,
        dead_letter_file: dir.join("dead-letter.jsonl"),
        max_in_flight: 16,
        max_queue_bytes: 64 << 20,
        downstream: "http://127.0.0.1:9/unused".into(),
        tenant_header: "x-tenant".into(),
        deliver_timeout: Duration::from_secs(1),
        adaptive: None,
        tenant_quota: None,
        retry: Some(
            RetryPolicy::new(4).backoff(Duration::from_millis(200), Duration::from_secs(2)),
        ),
        journal: None,
        fanout: Some(FanoutConfig {
            endpoints,
            header: "X-Destination".into(),
            max_in_flight_per_destination: 4,
            max_in_flight: 16,
            max_jobs: 100_000,
            breaker: BreakerConfig::default(),
        }),
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dripfeed-fanout-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn serve(relay: &Arc<Relay>) -> SocketAddr {
    let (addr, _task) = app::serve(
        "127.0.0.1:0".parse().unwrap(),
        app::router(relay.clone(), None),
        std::future::pending(),
    )
    .await
    .unwrap();
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_receiver_starves_neither_the_healthy_nor_the_slow_one() {
    let dir = temp_dir("three");
    let rx = fanout_demo::start_receivers().await.unwrap();
    let [(_, healthy), (_, slow), (_, dead)] = rx.urls.clone();
    let relay = Relay::start(config(
        &dir,
        vec![
            endpoint("healthy", &healthy, 100.0, None),
            endpoint("slow", &slow, 18.0, None),
            endpoint("dead", &dead, 25.0, None),
        ],
    ))
    .await
    .unwrap();
    let addr = serve(&relay).await;
    let fan = relay.fanout.as_ref().unwrap();

    // Sample the dead destination's deliveries in flight while flooding.
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (set, stop, most) = (fan.set.clone(), stop.clone(), most.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(d) = set.stats("dead") {
                    most.fetch_max(d.in_flight(), Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let sent =
        fanout_demo::flood(addr, "X-Destination", &["healthy", "slow", "dead"], 40, 15).await;
    let slow_in_run = fan.set.stats("slow").unwrap().delivered();
    // The healthy queue drains within moments of the flood's end.
    for _ in 0..100 {
        let h = fan.set.stats("healthy").unwrap();
        if h.held() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;

    let (h, s, d) = (&sent["healthy"], &sent["slow"], &sent["dead"]);
    let healthy = fan.set.stats("healthy").unwrap();
    let dead_stats = fan.set.stats("dead").unwrap();
    assert_eq!(h.sent, 600);
    assert!(h.accepted * 100 >= h.sent * 95, "healthy accepted {h:?}");
    assert_eq!(
        healthy.delivered(),
        h.accepted,
        "every accepted healthy webhook delivered"
    );
    assert!(
        slow_in_run >= 240,
        "slow delivered {slow_in_run} in 15 s: under 80 % of 20/s ({s:?})"
    );
    assert!(d.refused_503 > 0, "the dead queue fills: {d:?}");
    assert_eq!(
        d.with_retry_after, d.refused_503,
        "every 503 says when to retry"
    );
    assert!(dead_stats.breaker_opened() >= 1, "its breaker opened");
    assert_ne!(dead_stats.breaker(), BreakerState::Closed);
    assert!(
        most.load(Ordering::Relaxed) <= 4,
        "the dead one held at most its cap: {}",
        most.load(Ordering::Relaxed)
    );
    assert_eq!(dead_stats.delivered(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// HMAC-SHA256 (RFC 2104) over SHA-256, written here, not taken from a crate.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Standard Webhooks verification: the key is the base64 after `whsec_`,
/// the signed content `{webhook-id}.{webhook-timestamp}.{body}`, the header
/// a space-separated list of `v1,<base64>`.
fn verify(secret: &str, id: &str, ts: &str, body: &[u8], header: &str) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let Ok(key) = b64.decode(secret.trim_start_matches("whsec_")) else {
        return false;
    };
    let mut content = format!("{id}.{ts}.").into_bytes();
    content.extend_from_slice(body);
    let want = b64.encode(hmac_sha256(&key, &content));
    header
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|sig| sig == want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_signed_and_requests_name_only_configured_destinations() {
    // RFC 4231 test case 2 checks the HMAC written above.
    assert_eq!(
        hmac_sha256(b"Jefe", b"what do ya want for nothing?")[..4],
        [0x5b, 0xdc, 0xc1, 0x46]
    );
    type Seen = Arc<Mutex<Vec<(axum::http::HeaderMap, Vec<u8>)>>>;
    let seen: Seen = Arc::default();
    let app = {
        let seen = seen.clone();
        axum::Router::new().fallback(axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let mut seen = seen.lock().unwrap();
                    seen.push((headers, body.to_vec()));
                    // The first attempt is refused: the retry is signed again.
                    if seen.len() == 1 {
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        axum::http::StatusCode::NO_CONTENT
                    }
                }
            },
        ))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let dir = temp_dir("signed");
    let url = format!("http://{at}/hooks");
    let relay = Relay::start(config(
        &dir,
        vec![
            endpoint("signed", &url, 100.0, Some(secret)),
            endpoint("plain", &url, 100.0, None),
        ],
    ))
    .await
    .unwrap();
    let addr = serve(&relay).await;
    let client = reqwest::Client::new();
    let post = |dest: Option<&str>| {
        let mut req = client
            .post(format!("http://{addr}/v1/webhooks/deliver"))
            .body(r#"{"event":"invoice.paid"}"#);
        if let Some(d) = dest {
            req = req.header("X-Destination", d);
        }
        req.send()
    };
    let answer = post(Some("signed")).await.unwrap();
    assert_eq!(answer.status(), 202);
    let unknown = post(Some("http://169.254.169.254/latest")).await.unwrap();
    assert_eq!(unknown.status(), 404, "a request cannot name a URL");
    assert!(
        unknown
            .text()
            .await
            .unwrap()
            .contains("unknown-destination")
    );
    let missing = post(None).await.unwrap();
    assert_eq!(
        missing.status(),
        400,
        "two destinations: the header is needed"
    );

    for _ in 0..200 {
        if seen.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "refused once, then delivered");
    for (headers, body) in &seen {
        let h = |n: &str| headers.get(n).unwrap().to_str().unwrap().to_owned();
        assert_eq!(body, br#"{"event":"invoice.paid"}"#);
        assert!(verify(
            secret,
            &h("webhook-id"),
            &h("webhook-timestamp"),
            body,
            &h("webhook-signature")
        ));
        assert!(!verify(
            secret,
            &h("webhook-id"),
            "1",
            body,
            &h("webhook-signature")
        ));
        let ts: u64 = h("webhook-timestamp").parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(now.abs_diff(ts) < 60, "the timestamp is the attempt's time");
    }
    assert_eq!(
        seen[0].0.get("webhook-id"),
        seen[1].0.get("webhook-id"),
        "the same id on every attempt"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tenant's quota holds across destinations: one store charged whichever
/// receiver its webhooks go to (429 past it), other tenants unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_quota_holds_across_destinations() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(axum::routing::post(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = temp_dir("tenants");
    let url = format!("http://{at}/hooks");
    let mut cfg = config(
        &dir,
        vec![
            endpoint("a", &url, 100.0, None),
            endpoint("b", &url, 100.0, None),
        ],
    );
    // A burst of 3, then one every 100 s: the test never sees a refill.
    cfg.tenant_quota = Some(dripfeed::keyed::Quota::new(3.0, 0.01).unwrap());
    let relay = Relay::start(cfg).await.unwrap();
    let addr = serve(&relay).await;
    let client = reqwest::Client::new();
    let post = |dest: &str, tenant: &str| {
        client
            .post(format!("http://{addr}/v1/webhooks/deliver"))
            .header("X-Destination", dest)
            .header("x-tenant", tenant)
            .body("{}")
            .send()
    };
    let mut statuses = Vec::new();
    for dest in ["a", "b", "a", "b"] {
        statuses.push(post(dest, "acme").await.unwrap().status().as_u16());
    }
    assert_eq!(
        statuses,
        [202, 202, 202, 429],
        "3 in all, not 3 per destination"
    );
    assert_eq!(post("b", "globex").await.unwrap().status(), 202);
}
