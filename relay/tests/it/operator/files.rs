//! Every file the relay writes that holds bodies, tenants, keys or secrets
//! is owner-only (0600), whatever the umask: the dead-letter file, its
//! redrive record and a redrive's `.rest`, the webhook statuses and the
//! idempotency keys beside the journal, the state file. A temporary state
//! file a crashed run left is removed at start.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::mode;
use crate::contract::{Bench, Engine, post, receiver, send_json};
use crate::harness::{Relay, argv, eventually};
use crate::receivers::Log;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_holding_bodies_or_secrets_are_owner_only() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 400, Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Local,
        "files",
        &format!("--destination a=http://{rx}/a --retries 0"),
    )
    .await;
    let journal = bench.dir.join("journal-n1");
    // A temporary state file a crashed run left (it may hold secrets).
    let stale = journal.join("state.json.4242.tmp");
    let relay = &bench.relay;
    for n in 0..2 {
        let key = format!("k{n}");
        let p = post(
            relay,
            "a",
            &[("idempotency-key", &key)],
            &format!("{{\"n\":{n}}}"),
        )
        .await;
        assert_eq!(p.status, 202, "{}", p.body);
    }
    let dl = bench.dir.join("dead-letter.jsonl");
    let lines = eventually(Duration::from_secs(20), || async {
        std::fs::read_to_string(&dl).is_ok_and(|t| t.lines().count() >= 2)
    })
    .await;
    assert!(lines, "two dead letters");
    let (status, done) = send_json(
        Method::POST,
        &relay.admin_url("/v1/dead-letters/redrive"),
        &json!({"destination": "a"}),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let (status, made) = send_json(
        Method::PUT,
        &relay.admin_url("/v1/destinations/b"),
        &json!({"url": format!("http://{rx}/b"), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    for file in [
        dl.clone(),
        bench.dir.join("dead-letter.jsonl.redriven"),
        journal.join("idempotency.jsonl"),
        journal.join("statuses.jsonl"),
        journal.join("registry.kv"),
    ] {
        let got = eventually(Duration::from_secs(5), || async { file.exists() }).await;
        assert!(got, "{} was written", file.display());
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }

    // A restart removes a crashed run's temporary state file; a redrive's
    // .rest is owner-only too.
    let mut relay = bench.relay;
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    std::fs::write(&stale, b"{\"secret\":\"whsec_...\"}").expect("a stale temporary file");
    let moved = bench.dir.join("moved.jsonl");
    std::fs::rename(&dl, &moved).expect("moving the dead letters aside");
    std::fs::write(&moved, "not a line\n").expect("an unreadable line");
    let line = format!(
        "--destination a=http://{rx}/a --journal-dir {} --dead-letter-file {} --redrive {}",
        journal.display(),
        dl.display(),
        moved.display()
    );
    let again = Relay::start_with(&argv(&line), &[]).await;
    assert!(
        again
            .out
            .find(Duration::from_secs(30), |l| l.starts_with("redrive "))
            .await
            .is_some(),
        "redriven"
    );
    assert!(
        !stale.exists(),
        "the crashed run's temporary state file is gone"
    );
    assert_eq!(mode(&bench.dir.join("moved.jsonl.rest")), 0o600);
}
