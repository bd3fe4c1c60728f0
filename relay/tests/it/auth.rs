//! Tenant keys at intake. With `[[tenants]]` every request needs
//! `Authorization: Bearer KEY`: no key, an unknown one or an expired one is
//! a 401 with `WWW-Authenticate: Bearer`; a destination the key's tenant
//! may not use is a 403; the tenant is the key's, never `X-Tenant`'s, so a
//! caller cannot spend another tenant's quota; a tenant holds several keys,
//! each with an optional expiry. Refusals name no tenant or destination the
//! caller does not own. Without tenants the relay serves open only on
//! loopback, unless `--allow-unauthenticated`. `hash-key` prints the digest
//! the configuration holds.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::harness::{BIN, Relay, TempDir, digest, eventually, owned, run};
use crate::receivers::{self, Log};

/// acme's key that expired in 2020: refused.
const ACME_OLD: &str = "acme-key-2019";
/// acme's current key, expiring in 2999.
const ACME_KEY: &str = "acme-key-2025";
/// acme's next key, already valid (the rotation: both work).
const ACME_NEXT: &str = "acme-key-2026";
/// victim-corp's key.
const VICTIM_KEY: &str = "victim-corp-key";

/// The config file: billing and shipping; acme may post to billing only
/// (three keys, one expired, not limited); victim-corp to both, with a
/// quota of 3 webhooks then one per 100 s.
fn config(billing: &str, shipping: &str) -> String {
    format!(
        r#"tenant_header = "X-Tenant"
no_journal = true

[[destinations]]
name = "billing"
url = "{billing}"

[[destinations]]
name = "shipping"
url = "{shipping}"

[[tenants]]
name = "acme"
destinations = ["billing"]
[[tenants.keys]]
sha256 = "{old}"
expires_at = "2020-01-01T00:00:00Z"
[[tenants.keys]]
sha256 = "{key}"
expires_at = "2999-01-01T00:00:00Z"
[[tenants.keys]]
sha256 = "{next}"

[[tenants]]
name = "victim-corp"
rate = 0.01
burst = 3
[[tenants.keys]]
sha256 = "{victim}"
"#,
        old = digest(ACME_OLD),
        key = digest(ACME_KEY),
        next = digest(ACME_NEXT),
        victim = digest(VICTIM_KEY),
    )
}

/// An answer: status, `WWW-Authenticate`, content type, body.
struct Answer {
    status: u16,
    challenge: Option<String>,
    content_type: String,
    body: String,
}

/// POSTs a webhook with `headers`.
async fn post(relay: &Relay, headers: &[(&str, &str)]) -> Answer {
    let mut req = crate::harness::http()
        .post(relay.url("/v1/webhooks/deliver"))
        .header("content-type", "application/json")
        .body("{\"n\":1}");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the relay answers");
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    Answer {
        status: resp.status().as_u16(),
        challenge: header("www-authenticate"),
        content_type: header("content-type").unwrap_or_default(),
        body: resp.text().await.unwrap_or_default(),
    }
}

/// A relay with the tenants above, delivering to two recording receivers.
async fn tenants_relay(dir: &TempDir) -> (Relay, Arc<Log>, Arc<Log>) {
    let (billing, shipping) = (Arc::new(Log::default()), Arc::new(Log::default()));
    let b = receivers::ok(billing.clone(), Duration::ZERO).await;
    let s = receivers::ok(shipping.clone(), Duration::ZERO).await;
    let file = dir.join("relay.toml");
    let text = config(&format!("http://{b}/hooks"), &format!("http://{s}/hooks"));
    std::fs::write(&file, text).unwrap();
    let args = vec![
        "--config".to_owned(),
        file.display().to_string(),
        "--dead-letter-file".to_owned(),
        dir.arg("dl.jsonl"),
        // Its refusals are read from the status line (stdout is a pipe).
        "--status-line".to_owned(),
    ];
    (Relay::start_with(&args, &[]).await, billing, shipping)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_needed_and_decides_the_tenant_and_its_destinations() {
    let dir = TempDir::new("auth");
    let (relay, billing, shipping) = tenants_relay(&dir).await;
    let bearer = |key: &str| format!("Bearer {key}");

    // No key, an unknown key, an expired key, another scheme: 401.
    let acme_old = bearer(ACME_OLD);
    let unknown = bearer("guessed");
    let refused: [&[(&str, &str)]; 4] = [
        &[("x-destination", "billing")],
        &[("authorization", &unknown), ("x-destination", "billing")],
        &[("authorization", &acme_old), ("x-destination", "billing")],
        &[
            ("authorization", "Basic YWNtZTprZXk="),
            ("x-tenant", "acme"),
        ],
    ];
    for headers in refused {
        let a = post(&relay, headers).await;
        assert_eq!(a.status, 401, "{headers:?}: {}", a.body);
        let challenge = a.challenge.unwrap_or_default();
        assert!(challenge.starts_with("Bearer"), "{challenge:?}");
        assert_eq!(a.content_type, "application/problem+json");
        for secret in ["acme", "victim", "billing", "shipping"] {
            assert!(!a.body.contains(secret), "{secret} in {}", a.body);
        }
    }
    let expired = post(&relay, refused[2]).await;
    assert!(expired.body.contains("expired"), "{}", expired.body);

    // Two valid keys of one tenant (a rotation): both are acme.
    let (acme, next) = (bearer(ACME_KEY), bearer(ACME_NEXT));
    for key in [&acme, &next] {
        let a = post(
            &relay,
            &[("authorization", key), ("x-destination", "billing")],
        )
        .await;
        assert_eq!(a.status, 202, "{}", a.body);
    }
    // Without the header: the only destination acme may use.
    assert_eq!(post(&relay, &[("authorization", &acme)]).await.status, 202);

    // A destination acme may not use, configured or not: 403, naming none.
    for name in ["shipping", "no-such-destination"] {
        let a = post(&relay, &[("authorization", &acme), ("x-destination", name)]).await;
        assert_eq!(a.status, 403, "{name}: {}", a.body);
        assert!(
            !a.body.contains("shipping") && !a.body.contains("victim"),
            "{}",
            a.body
        );
    }

    // victim-corp may use every destination: an unknown one is a 404 that
    // lists none, and without the header a 400 that lists none.
    let victim = bearer(VICTIM_KEY);
    let a = post(
        &relay,
        &[("authorization", &victim), ("x-destination", "nope")],
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.body);
    let b = post(&relay, &[("authorization", &victim)]).await;
    assert_eq!(b.status, 422, "{}", b.body);
    for body in [&a.body, &b.body] {
        assert!(
            !body.contains("billing") && !body.contains("shipping"),
            "{body}"
        );
    }

    // acme naming victim-corp in X-Tenant is still acme: victim-corp's
    // quota (burst 3) is untouched, and spent only by its own key.
    for _ in 0..3 {
        let headers = [
            ("authorization", acme.as_str()),
            ("x-tenant", "victim-corp"),
            ("x-destination", "billing"),
        ];
        assert_eq!(post(&relay, &headers).await.status, 202);
    }
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let headers = [
            ("authorization", victim.as_str()),
            ("x-destination", "shipping"),
        ];
        statuses.push(post(&relay, &headers).await.status);
    }
    assert_eq!(statuses, [202, 202, 202, 429]);

    // Every 202 is delivered: acme's 6 to billing, victim-corp's 3 to shipping.
    assert!(
        billing
            .until(Duration::from_secs(20), |h| h.len() >= 6)
            .await
    );
    assert!(
        shipping
            .until(Duration::from_secs(20), |h| h.len() >= 3)
            .await
    );
    assert_eq!((billing.len(), shipping.len()), (6, 3));
    // The status line counts the refusals: 5 × 401, 2 × 403, 1 × 429.
    let counted = eventually(Duration::from_secs(15), || async {
        let all = relay.out.all();
        all.iter()
            .any(|l| l.contains("| 429 1 | 413 0 | 401 5 | 403 2 |"))
    })
    .await;
    assert!(counted, "{:?}", relay.out.all());
    // And /metrics: dripfeed_relay_auth_refused_total by status.
    let m = relay.metrics().await;
    let refused = |status| m.get("dripfeed_relay_auth_refused_total", &[("status", status)]);
    assert_eq!((refused("401"), refused("403")), (5.0, 2.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_relay_serves_only_on_loopback_unless_allowed() {
    let dir = TempDir::new("open-relay");
    let open = [
        "--listen",
        "0.0.0.0:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--downstream",
        "http://127.0.0.1:9/hooks",
        "--allow-destination-cidr",
        "127.0.0.0/8",
        "--no-journal",
        "--dead-letter-file",
    ];
    let dl = dir.arg("dl.jsonl");
    let mut args: Vec<&str> = open.to_vec();
    args.push(&dl);
    let (code, out, err) = run(&args, &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    for says in [
        "0.0.0.0:0 is not a loopback address",
        "[[tenants]]",
        "--allow-unauthenticated",
    ] {
        assert!(err.contains(says), "{says:?} not in {err}");
    }
    // An admin listener off loopback needs the admin token.
    let admin = [
        "--admin-listen",
        "0.0.0.0:0",
        "--downstream",
        "http://127.0.0.1:9/hooks",
        "--allow-destination-cidr",
        "127.0.0.0/8",
        "--no-journal",
    ];
    let (code, _, err) = run(&admin, &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no admin_token_sha256 is configured"), "{err}");
    // check-config says the same.
    let (code, _, err) = run(&[&["check-config", "/dev/null"], &args[..]].concat(), &[]).await;
    assert_eq!(code, 2, "{err}");

    // With the flag it serves, and warns.
    args.push("--allow-unauthenticated");
    let relay = Relay::spawn(&owned(&args), &[]).await;
    let warned = relay
        .err
        .find(Duration::from_secs(10), |l| {
            l.contains("serving without API keys")
        })
        .await;
    assert!(warned.is_some(), "{:?}", relay.err.all());

    // With tenants it serves on any address, and asks for a key.
    let file = dir.join("relay.toml");
    let tenant = format!(
        "[[tenants]]\nname = \"acme\"\n[[tenants.keys]]\nsha256 = \"{}\"\n",
        digest(ACME_KEY)
    );
    std::fs::write(&file, tenant).unwrap();
    let mut args: Vec<&str> = open.to_vec();
    args.extend([dl.as_str(), "--config", file.to_str().unwrap()]);
    // The demos post without keys: not with tenants.
    let demo = ["--demo", "--config", file.to_str().unwrap(), "--no-journal"];
    let (code, _, err) = run(&demo, &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--demo posts without API keys"), "{err}");
    let relay = Relay::spawn(&owned(&args), &[]).await;
    let port = relay.addr.port();
    let url = format!("http://127.0.0.1:{port}/v1/webhooks/deliver");
    let resp = crate::harness::http()
        .post(&url)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let resp = crate::harness::http()
        .post(&url)
        .bearer_auth(ACME_KEY)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_key_prints_the_digest_of_standard_input() {
    let hash = |input: &'static [u8]| async move {
        let mut child = tokio::process::Command::new(BIN)
            .arg("hash-key")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("hash-key runs");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input).await.unwrap();
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
            .await
            .expect("hash-key ends")
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // echo's newline is not part of the key.
    let (code, out) = hash(b"acme-key-2025\n").await;
    assert_eq!(code, Some(0));
    assert_eq!(out, format!("{}\n", digest(ACME_KEY)));
    let (code, _) = hash(b"\n").await;
    assert_eq!(code, Some(2));
}
