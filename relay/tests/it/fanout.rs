//! The relay fanning out: three receivers (healthy, slow, dead: takes the
//! connection and never answers) each flooded at 40/s for 15 s; signed
//! deliveries checked against the Standard Webhooks scheme written here
//! from the spec (HMAC-SHA256 built from SHA-256, not the relay's signer);
//! a tenant's quota across destinations.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::harness::{Relay, TempDir, eventually};
use crate::load::burst;
use crate::receivers::{self, Hit, Log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_receiver_starves_neither_the_healthy_nor_the_slow_one() {
    let (healthy_log, slow_log) = (Arc::new(Log::default()), Arc::new(Log::default()));
    let healthy = receivers::ok(healthy_log.clone(), Duration::ZERO).await;
    let slow = receivers::ok(slow_log, Duration::from_millis(40)).await;
    let dead = receivers::dead().await;
    let dir = TempDir::new("fanout");
    let file = dir.join("destinations.toml");
    std::fs::write(
        &file,
        format!(
            "[[destinations]]\nname = \"healthy\"\nurl = \"http://{healthy}/hooks\"\nrate = 100\nceiling = 100\n\n\
             [[destinations]]\nname = \"slow\"\nurl = \"http://{slow}/hooks\"\nrate = 18\nceiling = 18\n\n\
             [[destinations]]\nname = \"dead\"\nurl = \"http://{dead}/hooks\"\nrate = 25\nceiling = 25\n"
        ),
    )
    .unwrap();
    let relay = Arc::new(
        Relay::start(&format!(
            "--destinations {} --drain-rate 100 --latency-budget 2s \
            --max-in-flight 16 --max-in-flight-per-destination 4 \
            --deliver-timeout 1s --retries 3 --retry-min 200ms --retry-max 2s \
            --no-journal --dead-letter-file {}",
            file.to_string_lossy(),
            dir.arg("dead-letter.jsonl")
        ))
        .await,
    );
    // Sample the dead destination's deliveries in flight while flooding.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (relay, stop) = (relay.clone(), stop.clone());
        tokio::spawn(async move {
            let mut most = 0.0f64;
            while !stop.load(Ordering::Relaxed) {
                let m = relay.metrics().await;
                most = most.max(m.get("leaky_bucket_in_flight", &[("destination", "dead")]));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            most
        })
    };
    let names = ["healthy", "slow", "dead"];
    let sent = burst(relay.addr, 120, 15, |n| {
        vec![("x-destination", names[n as usize % 3].to_owned())]
    })
    .await;
    let delivered = |m: &crate::harness::Metrics, d: &str| {
        m.get(
            "leaky_bucket_jobs_total",
            &[("destination", d), ("outcome", "delivered")],
        )
    };
    let slow_in_run = delivered(&relay.metrics().await, "slow");
    stop.store(true, Ordering::Relaxed);
    let most = sampler.await.unwrap();
    assert_eq!(sent.errors, 0);
    assert_eq!(sent.statuses.values().sum::<u64>(), 1800);

    let m = relay.metrics().await;
    let accepted = |d: &str| m.get("leaky_bucket_admitted_total", &[("destination", d)]);
    let refused = |d: &str| {
        m.get(
            "leaky_bucket_rejected_total",
            &[("destination", d), ("reason", "overloaded")],
        )
    };
    assert!(
        accepted("healthy") >= 570.0,
        "healthy accepted {}",
        accepted("healthy")
    );
    // The healthy queue drains within moments of the flood's end.
    let healthy_done = eventually(Duration::from_secs(5), || async {
        let m = relay.metrics().await;
        delivered(&m, "healthy")
            >= m.get("leaky_bucket_admitted_total", &[("destination", "healthy")])
    })
    .await;
    assert!(healthy_done, "every accepted healthy webhook delivered");
    assert_eq!(healthy_log.len() as f64, accepted("healthy"));
    assert!(
        slow_in_run >= 240.0,
        "slow delivered {slow_in_run} in 15 s: under 80 % of 20/s"
    );
    assert!(refused("dead") > 0.0, "the dead queue fills");
    assert_eq!(
        sent.waits(503).len() as u64,
        sent.count(503),
        "every 503 says when to retry"
    );
    assert!(
        m.get(
            "leaky_bucket_breaker_opened_total",
            &[("destination", "dead")]
        ) >= 1.0,
        "its breaker opened"
    );
    assert!(
        m.get("leaky_bucket_breaker_open", &[("destination", "dead")]) >= 1.0,
        "and is not closed"
    );
    assert!(most <= 4.0, "the dead one held at most its cap: {most}");
    assert_eq!(delivered(&m, "dead"), 0.0);
    for d in names {
        assert!(
            m.find(
                "leaky_bucket_drain_rate",
                &[("throttle", "webhook_relay"), ("destination", d)]
            )
            .is_some(),
            "{d}'s series"
        );
    }
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
    let log = Arc::new(Log::default());
    // The first attempt is refused: the retry is signed again.
    let answer = |_: &Hit, tries: usize| match tries {
        1 => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        _ => StatusCode::NO_CONTENT.into_response(),
    };
    let at = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let dir = TempDir::new("signed");
    // The destinations come from the --config file this time.
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "no_journal = true\nretries = 3\nretry_min = \"200ms\"\n\n\
             [[destinations]]\nname = \"signed\"\nurl = \"http://{at}/hooks\"\nsecret = \"{secret}\"\n\n\
             [[destinations]]\nname = \"plain\"\nurl = \"http://{at}/hooks\"\n"
        ),
    )
    .unwrap();
    let relay = Relay::start(&format!(
        "--config {} --dead-letter-file {}",
        config.to_string_lossy(),
        dir.arg("dl.jsonl")
    ))
    .await;
    let body = r#"{"event":"invoice.paid"}"#;
    assert_eq!(
        relay.post(&[("X-Destination", "signed")], body).await.0,
        202
    );
    let (status, problem) = relay
        .post(&[("X-Destination", "http://169.254.169.254/latest")], body)
        .await;
    assert_eq!(status, 404, "a request cannot name a URL");
    assert_eq!(problem["type"], "urn:dripfeed:problem:unknown-destination");
    let (status, problem) = relay.post(&[], body).await;
    assert_eq!(status, 422, "two destinations: the header is needed");
    assert_eq!(problem["type"], "urn:dripfeed:problem:missing-destination");

    assert!(
        log.until(Duration::from_secs(10), |hits| hits.len() >= 2)
            .await,
        "refused once, then delivered"
    );
    let seen = log.hits();
    assert_eq!(seen.len(), 2);
    for hit in &seen {
        let h = |n: &str| hit.headers.get(n).unwrap().to_str().unwrap().to_owned();
        assert_eq!(&hit.body[..], body.as_bytes());
        assert!(verify(
            secret,
            &h("webhook-id"),
            &h("webhook-timestamp"),
            &hit.body,
            &h("webhook-signature")
        ));
        assert!(!verify(
            secret,
            &h("webhook-id"),
            "1",
            &hit.body,
            &h("webhook-signature")
        ));
        let ts: u64 = h("webhook-timestamp").parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(now.abs_diff(ts) < 60, "the timestamp is the attempt's time");
        assert_eq!(
            h("webhook-id"),
            hit.key,
            "webhook-id is the idempotency key"
        );
    }
    assert_eq!(
        seen[0].headers.get("webhook-id"),
        seen[1].headers.get("webhook-id"),
        "the same id on every attempt"
    );
    // The secret is never printed.
    let (_, printed, _) = crate::harness::run(
        &["print-config", "--config", &config.to_string_lossy()],
        &[],
    )
    .await;
    assert!(!printed.contains("MfKQ9r8"), "{printed}");
}

/// A tenant's quota holds across destinations: one store charged whichever
/// receiver its webhooks go to (429 past it), other tenants unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_quota_holds_across_destinations() {
    let at = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("tenants-across");
    let (a, b) = (
        format!("a=http://{at}/hooks"),
        format!("b=http://{at}/hooks"),
    );
    // A burst of 3, then one every 100 s: the test never sees a refill.
    let relay = Relay::start(&format!(
        "--destination {a} --destination {b} --tenant-rate 0.01 \
            --tenant-burst 3 --tenant-header x-tenant --no-journal \
            --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    let mut statuses = Vec::new();
    for dest in ["a", "b", "a", "b"] {
        let (status, _) = relay
            .post(&[("X-Destination", dest), ("x-tenant", "acme")], "{}")
            .await;
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        [202, 202, 202, 429],
        "3 in all, not 3 per destination"
    );
    assert_eq!(
        relay
            .post(&[("X-Destination", "b"), ("x-tenant", "globex")], "{}")
            .await
            .0,
        202
    );
}

/// A secret being replaced: every delivery carries both signatures, so a
/// receiver still on the old secret and one already on the new verify it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_being_replaced_signs_with_both() {
    let log = Arc::new(Log::default());
    let answer = |_: &Hit, _: usize| StatusCode::NO_CONTENT.into_response();
    let at = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let new = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let old = "whsec_c2VjcmV0LWJlaW5nLXJlcGxhY2VkLW5vdw==";
    let dir = TempDir::new("rotating");
    let config = dir.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "no_journal = true\n\n[[destinations]]\nname = \"rotating\"\nurl = \"http://{at}/hooks\"\n\
             secret = \"{new}\"\nprevious_secret = \"{old}\"\n"
        ),
    )
    .unwrap();
    let relay = Relay::start(&format!(
        "--config {} --dead-letter-file {}",
        config.to_string_lossy(),
        dir.arg("dl.jsonl")
    ))
    .await;
    let body = r#"{"event":"key.rotated"}"#;
    for _ in 0..3 {
        assert_eq!(relay.post(&[], body).await.0, 202);
    }
    assert!(
        log.until(Duration::from_secs(10), |hits| hits.len() >= 3)
            .await,
        "delivered"
    );
    for hit in &log.hits() {
        let h = |n: &str| hit.headers.get(n).unwrap().to_str().unwrap().to_owned();
        let (id, ts, sigs) = (
            h("webhook-id"),
            h("webhook-timestamp"),
            h("webhook-signature"),
        );
        assert_eq!(sigs.split(' ').count(), 2, "two signatures: {sigs}");
        assert!(verify(new, &id, &ts, &hit.body, &sigs), "the new secret's");
        assert!(verify(old, &id, &ts, &hit.body, &sigs), "the old secret's");
        let stranger = "whsec_c29tZW9uZS1lbHNlcy1rZXk=";
        assert!(!verify(stranger, &id, &ts, &hit.body, &sigs));
    }
    // The previous secret alone is refused at start: it needs the new one.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "[[destinations]]\nname = \"x\"\nurl = \"http://{at}/hooks\"\nprevious_secret = \"{old}\"\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(crate::harness::BIN)
        .args(["check-config", &bad.to_string_lossy()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("previous_secret"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A relay started with one configured destination lets that one run all
/// of `max_in_flight`; destinations made later through the admin API get
/// the cap of 8, so a dead one among them leaves room for the others (a
/// healthy one is delivered at once, not after `deliver_timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sole_destination_takes_the_budget_and_later_ones_their_cap() {
    let log = Arc::new(Log::default());
    let healthy = receivers::ok(log.clone(), Duration::ZERO).await;
    let dead = receivers::dead().await;
    let dir = TempDir::new("fanout-caps");
    let relay = Relay::start(&format!(
        "--destination main=http://{dead}/main --max-in-flight 32 --drain-rate 200 \
         --deliver-timeout 10s --retries 0 --data-dir {}",
        dir.arg("data")
    ))
    .await;
    let client = crate::harness::http();
    for (name, addr) in [("later", dead), ("ok", healthy)] {
        let url = relay.admin_url(&format!("/v1/destinations/{name}"));
        let body = serde_json::json!({"url": format!("http://{addr}/{name}"), "rate": 200});
        let made = client
            .put(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), 201, "{name}");
    }
    let in_flight = |name: &'static str| {
        let url = relay.admin_url(&format!("/v1/destinations/{name}"));
        let client = client.clone();
        async move {
            let text = client.get(url).send().await.unwrap().text().await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            v["live"]["in_flight"].as_u64().unwrap_or(0)
        }
    };
    for n in 0..20 {
        assert_eq!(relay.post_for("later", n).await.0, 202);
    }
    for n in 0..12 {
        assert_eq!(relay.post_for("main", n).await.0, 202);
    }
    let held = eventually(Duration::from_secs(10), || async {
        in_flight("later").await == 8 && in_flight("main").await == 12
    })
    .await;
    assert!(
        held,
        "later {} (cap 8), main {} (all 12 it was given)",
        in_flight("later").await,
        in_flight("main").await
    );
    // 20 of 32 places held: a healthy destination is delivered at once.
    let asked = tokio::time::Instant::now();
    for n in 0..5 {
        assert_eq!(relay.post_for("ok", n).await.0, 202);
    }
    assert!(log.until(Duration::from_secs(9), |h| h.len() >= 5).await);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(in_flight("later").await, 8, "never above its cap");
}
