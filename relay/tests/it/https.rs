//! HTTPS receivers: a CA and a certificate for `localhost` made here
//! (rcgen), a TLS receiver on loopback (tokio-rustls + hyper). With
//! `--ca-file` naming the CA every webhook arrives; without it the
//! certificate is not trusted, nothing arrives, and every webhook ends in
//! the dead-letter file.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::harness::{Relay, TempDir, eventually};
use crate::receivers::{self, Hit, Log};

/// A private CA (PEM) and a TLS server config for `localhost` and 127.0.0.1 signed by it.
pub(crate) fn certificates() -> (String, rustls::ServerConfig) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "dripfeed test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    (ca.pem(), server)
}

/// A TLS receiver recording into `log`; its port.
pub(crate) async fn tls_receiver(config: rustls::ServerConfig, log: Arc<Log>) -> SocketAddr {
    let app = receivers::recording_app(
        log,
        Duration::ZERO,
        Arc::new(|_: &Hit, _| StatusCode::NO_CONTENT.into_response()),
    );
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_receiver_gets_its_webhooks_with_the_ca_file_and_none_without() {
    let (ca_pem, server) = certificates();
    let dir = TempDir::new("https");
    std::fs::write(dir.join("ca.pem"), ca_pem).unwrap();
    let log = Arc::new(Log::default());
    let port = tls_receiver(server, log.clone()).await.port();
    let url = format!("https://localhost:{port}/hooks");

    let trusting = Relay::start(&format!(
        "--downstream {url} --ca-file {} --no-journal --retries 0 --dead-letter-file {}",
        dir.arg("ca.pem"),
        dir.arg("dl-1.jsonl")
    ))
    .await;
    let mut ids = std::collections::HashSet::new();
    for n in 0..20 {
        let (status, body) = trusting.post(&[], &format!("{{\"n\":{n}}}")).await;
        assert_eq!(status, 202, "{body}");
        ids.insert(body["id"].as_str().unwrap().to_owned());
    }
    assert!(
        log.until(Duration::from_secs(20), |hits| hits.len() >= 20)
            .await,
        "{} of 20 arrived",
        log.len()
    );
    let keys: std::collections::HashSet<String> = log.keys().into_keys().collect();
    assert_eq!(keys, ids, "every webhook arrived over TLS, under its id");

    // Without the CA the receiver's certificate is refused.
    let mut doubting = Relay::start(&format!(
        "--downstream {url} --no-journal --retries 0 --shutdown-grace 1s --dead-letter-file {}",
        dir.arg("dl-2.jsonl")
    ))
    .await;
    for n in 0..10 {
        assert_eq!(doubting.post(&[], &format!("{{\"n\":{n}}}")).await.0, 202);
    }
    let failed = eventually(Duration::from_secs(20), || async {
        doubting.metrics().await.get(
            "leaky_bucket_delivery_failures_total",
            &[("destination", "default")],
        ) >= 5.0
    })
    .await;
    assert!(failed, "deliveries fail on the certificate");
    doubting.signal("TERM");
    assert!(doubting.exit(Duration::from_secs(30)).await.success());
    let done = doubting
        .out
        .find(Duration::from_secs(1), |l| l.starts_with("delivered "))
        .await
        .unwrap();
    assert!(
        done.starts_with("delivered 0,") && done.ends_with("(10 lines this run)"),
        "{done}"
    );
    assert_eq!(log.len(), 20, "nothing arrived without the CA");
}
