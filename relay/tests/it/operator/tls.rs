//! TLS on both listeners (`--tls-cert`/`--tls-key`,
//! `--admin-tls-cert`/`--admin-tls-key`): webhooks and the admin API over
//! HTTPS, nothing in clear; a client that never finishes its handshake is
//! closed after `header_read_timeout` and holds one of `max_connections`
//! meanwhile; on SIGHUP the certificate files are read again: a connection
//! open across the reload keeps working, a new one gets the new
//! certificate. (Before, the relay had no TLS listener at all.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio::io::AsyncReadExt;

use crate::contract::receiver;
use crate::harness::{Relay, TempDir, eventually};
use crate::receivers::Log;

/// A CA's PEM, and a certificate for `localhost` and 127.0.0.1 it signed
/// with its key (PEM).
fn issue(ca_name: &str) -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// A client trusting only `ca` (PEM).
fn trusting(ca: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// POSTs one webhook with `client`: its status, 0 without an answer.
async fn post(client: &reqwest::Client, url: &str) -> u16 {
    client
        .post(url)
        .header("content-type", "application/json")
        .body("{\"tls\":true}")
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_listeners_speak_tls_and_take_new_certificates_on_sighup() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let dir = TempDir::new("tls");
    let (ca1, cert1, key1) = issue("dripfeed test CA one");
    std::fs::write(dir.join("relay.pem"), &cert1).unwrap();
    std::fs::write(dir.join("relay.key"), &key1).unwrap();
    let relay = Relay::start(&format!(
        "--tls-cert {pem} --tls-key {key} --admin-tls-cert {pem} --admin-tls-key {key} \
         --header-read-timeout 3s --max-connections 4 --no-journal \
         --dead-letter-file {dl} --downstream http://{rx}/in",
        pem = dir.arg("relay.pem"),
        key = dir.arg("relay.key"),
        dl = dir.arg("dead-letter.jsonl"),
    ))
    .await;
    assert!(relay.tls, "it says https://");
    let url = relay.url("/v1/webhooks/deliver");
    let one = trusting(&ca1);
    assert_eq!(post(&one, &url).await, 202, "a webhook over TLS");
    let admin = relay.admin.expect("an admin address");
    let health = one
        .get(format!("https://{admin}/healthz"))
        .send()
        .await
        .map(|r| r.status().as_u16());
    assert_eq!(health.ok(), Some(200), "the admin listener over TLS");
    let clear = crate::harness::http()
        .post(url.replace("https://", "http://"))
        .body("{}")
        .send()
        .await;
    assert!(clear.is_err(), "nothing answered in clear: {clear:?}");

    // Connections that never start their handshake hold the slots, then
    // are closed after header_read_timeout.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tokio::net::TcpStream::connect(relay.addr).await.unwrap());
    }
    assert_eq!(
        post(&trusting(&ca1), &url).await,
        0,
        "past max_connections a new connection is closed"
    );
    for mut stream in idle {
        let mut buf = [0u8; 64];
        let closed = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "a handshake that never came is closed: {closed:?}"
        );
    }
    let page = one
        .get(format!("https://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refused = crate::harness::Metrics::parse(&page).get(
        "dripfeed_relay_connections_refused_total",
        &[("listener", "intake")],
    );
    assert!(refused >= 1.0, "{refused}");

    // A new certificate, from another CA, taken on SIGHUP while webhooks
    // flow on a connection opened before.
    let (ca2, cert2, key2) = issue("dripfeed test CA two");
    let flowing = Arc::new(AtomicU64::new(0));
    let steady = {
        let (one, url, flowing) = (one.clone(), url.clone(), flowing.clone());
        tokio::spawn(async move {
            let mut not_202 = 0;
            for _ in 0..40 {
                match post(&one, &url).await {
                    202 => flowing.fetch_add(1, Ordering::Relaxed),
                    _ => {
                        not_202 += 1;
                        0
                    }
                };
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            not_202
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::fs::write(dir.join("relay.pem"), &cert2).unwrap();
    std::fs::write(dir.join("relay.key"), &key2).unwrap();
    relay.signal("HUP");
    let two = trusting(&ca2);
    let renewed = eventually(Duration::from_secs(20), || async {
        post(&two, &url).await == 202
    })
    .await;
    assert!(renewed, "a new connection gets the new certificate");
    assert_eq!(steady.await.unwrap(), 0, "the open connection kept working");
    assert_eq!(
        post(&trusting(&ca1), &url).await,
        0,
        "a new connection no longer gets the old certificate"
    );
    let admin_two = two.get(format!("https://{admin}/healthz")).send().await;
    assert_eq!(admin_two.map(|r| r.status().as_u16()).ok(), Some(200));
    let sent = 2 + flowing.load(Ordering::Relaxed);
    assert!(
        log.until(Duration::from_secs(20), |h| h.len() as u64 >= sent)
            .await,
        "{} of {sent} delivered",
        log.len()
    );
}

/// A key given by flag that cannot be read is blamed on the flag, not on
/// the file's `tls_cert` line; a certificate given in the file that
/// cannot be read is blamed on its line.
#[tokio::test]
async fn check_config_names_the_setting_and_place_at_fault() {
    let dir = TempDir::new("tls-blame");
    let (_, cert, _) = issue("blame CA");
    std::fs::write(dir.join("relay.pem"), cert).unwrap();
    std::fs::write(dir.join("bad.key"), "not a key").unwrap();
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "drain_rate = 10\ntls_cert = \"{}\"\n\n[[destinations]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/\"\n",
            dir.arg("relay.pem")
        ),
    )
    .unwrap();
    let file_arg = file.to_string_lossy().into_owned();
    let key = dir.arg("bad.key");
    let (code, out, err) =
        crate::harness::run(&["check-config", &file_arg, "--tls-key", &key], &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--tls-key"), "the flag is named: {err}");
    assert!(
        !err.contains("relay.toml:2"),
        "not the file's tls_cert line: {err}"
    );

    std::fs::write(dir.join("relay.pem"), "not a certificate").unwrap();
    let (code, _, err) = crate::harness::run(
        &["check-config", &file_arg, "--tls-key", &dir.arg("bad.key")],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("relay.toml:2"),
        "the certificate's line: {err}"
    );
}
