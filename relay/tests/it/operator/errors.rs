//! Delivery errors you can see, in both engines: a receiver whose
//! certificate is refused (self-signed, a CA used as its own leaf, as
//! `openssl req -x509` makes one), a port nothing listens on, a name that
//! does not resolve and a receiver that answers 413 each end in a
//! webhook's `last_error` naming its kind, in its dead letter, in the
//! destination's admin view, in `dripfeed_relay_delivery_errors_total`
//! and in a WARN line naming the destination.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::contract::{Bench, Engine, both, get_json, post, receiver, send_json};
use crate::harness::eventually;
use crate::receivers::Log;

/// A server config with a self-signed certificate for `localhost` that
/// says it is a CA, as `openssl req -x509` makes one.
fn self_signed() -> rustls::ServerConfig {
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap()
}

async fn each_failure_names_its_kind(engine: Engine) {
    let log = Arc::new(Log::default());
    let tls = crate::https::tls_receiver(self_signed(), log.clone()).await;
    let too_large = receiver(log.clone(), 413, Duration::ZERO).await;
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let bench = Bench::start(
        engine,
        "errors",
        &format!(
            "--retries 0 \
             --destination cert=https://localhost:{}/h \
             --destination closed=http://{closed}/h \
             --destination nodns=http://no-such-host.invalid/h \
             --destination big=http://{too_large}/h",
            tls.port()
        ),
    )
    .await;
    let relay = &bench.relay;
    let wanted = [
        ("cert", "tls", "tls: "),
        ("closed", "connect", "connect: "),
        ("nodns", "dns", "dns: "),
        ("big", "too_large", "too_large: "),
    ];
    let mut ids = Vec::new();
    for (destination, _, _) in wanted {
        let p = post(relay, destination, &[], "{\"n\":1}").await;
        assert_eq!(p.status, 202, "{destination}: {}", p.body);
        ids.push(p.body["id"].as_str().unwrap_or_default().to_owned());
    }
    for ((destination, kind, prefix), id) in wanted.iter().zip(&ids) {
        // The webhook's status says why.
        let url = relay.url(&format!("/v1/webhooks/{id}"));
        let ended = eventually(Duration::from_secs(20), || {
            let url = url.clone();
            async move { get_json(&url).await["state"] == "dead_lettered" }
        })
        .await;
        let status = get_json(&url).await;
        assert!(ended, "{destination}: {status}");
        let error = status["last_error"].as_str().unwrap_or_default();
        assert!(error.starts_with(prefix), "{destination}: {status}");
        if *destination == "cert" {
            assert!(
                error.contains("CaUsedAsEndEntity") || error.contains("certificate"),
                "the certificate's error itself: {error}"
            );
        }
        // So do the destination's view and the counter.
        let view = get_json(&relay.admin_url(&format!("/v1/destinations/{destination}"))).await;
        assert_eq!(view["last_error"]["kind"], *kind, "{view}");
        assert!(view["last_error"]["count"].as_u64() >= Some(1), "{view}");
        let counted = relay.metrics().await.get(
            "dripfeed_relay_delivery_errors_total",
            &[("destination", destination), ("kind", kind)],
        );
        assert!(counted >= 1.0, "{destination} {kind}: {counted}");
    }
    // And the log, at WARN, naming the destination.
    for (destination, _, _) in wanted {
        let line = relay
            .err
            .find(Duration::from_secs(5), |l| {
                l.contains("WARN") && l.contains("delivery failed") && l.contains(destination)
            })
            .await;
        assert!(line.is_some(), "a WARN line for {destination}");
    }
    // The dead letters carry the error too.
    let letters = get_json(&relay.admin_url("/v1/dead-letters?limit=100")).await;
    let errors: Vec<&str> = letters["dead_letters"]
        .as_array()
        .map(|all| all.iter().filter_map(|d| d["error"].as_str()).collect())
        .unwrap_or_default();
    for (destination, _, prefix) in wanted {
        assert!(
            errors.iter().any(|e| e.starts_with(prefix)),
            "{destination}'s dead letter names its error: {letters}"
        );
    }
    assert_eq!(log.len(), 1, "only the receiver answering 413 was reached");
}

both!(each_failure_names_its_kind);

/// A destination deleted while its last delivery is failing, and made again
/// under its name once the deleted one has ended, starts with no last
/// error: the failure told after the DELETE was answered (the attempt ended
/// within the grace) is forgotten with the deleted destination, in the
/// relay that deleted it as in the others.
async fn one_made_again_starts_with_no_error(engine: Engine) {
    let log = Arc::new(Log::default());
    let ok = receiver(log.clone(), 204, Duration::ZERO).await;
    // Records each request as it comes, answers 500 a while later.
    let arrived = Arc::new(Log::default());
    let failing = {
        let arrived = arrived.clone();
        crate::receivers::serve(axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let arrived = arrived.clone();
                async move {
                    arrived.record(&uri, &headers, body);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR
                }
            },
        ))
        .await
    };
    let bench = Bench::start(
        engine,
        "errors-again",
        &format!("--retries 0 --destination ok=http://{ok}/h"),
    )
    .await;
    let relay = &bench.relay;
    let url = relay.admin_url("/v1/destinations/again");
    let body = serde_json::json!({ "url": format!("http://{failing}/h") });
    let (status, answer) = send_json(reqwest::Method::PUT, &url, &body).await;
    assert_eq!(status, 201, "{answer}");
    let p = post(relay, "again", &[], "{\"n\":1}").await;
    assert_eq!(p.status, 202, "{}", p.body);
    // Deleted while its attempt waits for the 500.
    let reached = eventually(Duration::from_secs(10), || async { arrived.len() >= 1 }).await;
    assert!(reached, "the attempt started");
    let (status, answer) = send_json(reqwest::Method::DELETE, &url, &serde_json::json!({})).await;
    assert_eq!(status, 202, "{answer}");
    // Gone once its drain has ended (the failing attempt with it).
    let again = serde_json::json!({ "url": "http://127.0.0.1:9/h" });
    let gone = eventually(Duration::from_secs(20), || {
        let (url, again) = (url.clone(), again.clone());
        async move { send_json(reqwest::Method::PUT, &url, &again).await.0 == 201 }
    })
    .await;
    assert!(gone, "made again once the deleted one ended");
    let view = get_json(&url).await;
    assert!(
        view["last_error"].is_null(),
        "no error of the deleted one: {view}"
    );
}

both!(one_made_again_starts_with_no_error);
