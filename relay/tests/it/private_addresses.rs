//! Deliveries never reach a loopback, private, link-local (the cloud
//! metadata address), CGNAT or unspecified address unless
//! `--allow-destination-cidr` covers it. A destination whose IP literal is
//! refused, or whose name resolves to a refused address at start, keeps
//! the relay from starting (exit 2, naming the flag); a name that resolves
//! to a refused address only later is refused at the connection: a final
//! failure, dead-lettered with the refusal as its `error`, the receiver
//! never reached. With the allow list the same destination is delivered to.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually, owned, run};
use crate::receivers::{self, Log};

const POSTS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_address_keeps_the_relay_from_starting() {
    let cases = [
        (
            "http://127.0.0.1:9/hooks",
            "127.0.0.1 is a loopback address",
            "127.0.0.0/8",
        ),
        (
            "http://169.254.169.254/latest/meta-data",
            "link-local",
            "169.254.0.0/16",
        ),
        ("http://10.1.2.3/hooks", "private", "10.0.0.0/8"),
        ("http://100.64.0.1/hooks", "CGNAT", "100.64.0.0/10"),
        (
            "http://[::ffff:127.0.0.1]:9/hooks",
            "loopback",
            "127.0.0.0/8",
        ),
        ("http://0.0.0.0:9/hooks", "unspecified", "0.0.0.0/8"),
        ("http://[fd00::1]/hooks", "private", "fc00::/7"),
        ("http://localhost:9/hooks", "loopback", ""),
    ];
    for (url, why, allow) in cases {
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--no-journal",
            "--downstream",
            url,
        ];
        let (code, out, err) = run(&args, &[]).await;
        assert_eq!(code, 2, "{url}: {out}{err}");
        assert!(err.contains(why), "{url}: {why:?} not in {err}");
        assert!(
            err.contains(&format!("--allow-destination-cidr {allow}")),
            "{err}"
        );
        let (code, _, err) = run(&[&["check-config", "/dev/null"], &args[4..]].concat(), &[]).await;
        assert_eq!(code, 2, "check-config {url}: {err}");
    }
}

/// A relay delivering to `localhost` (checked only at connection), with
/// `allow` flags; the receiver's log and the dead-letter file.
async fn relay_to_localhost(dir: &TempDir, allow: &[&str]) -> (Relay, Arc<Log>) {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let mut args = owned(&[
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--no-journal",
        "--retries",
        "3",
        "--retry-min",
        "10ms",
        "--resolve-destinations-at-start=false",
        "--downstream",
        &format!("http://localhost:{}/hooks", rx.port()),
        "--dead-letter-file",
        &dir.arg("dl.jsonl"),
    ]);
    args.extend(owned(allow));
    (Relay::spawn(&args, &[]).await, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_is_dead_lettered_unless_allowed() {
    let dir = TempDir::new("private-refused");
    let (relay, log) = relay_to_localhost(&dir, &[]).await;
    for n in 0..POSTS {
        let (status, body) = relay.post(&[], &format!("{{\"n\":{n}}}")).await;
        assert_eq!(status, 202, "{body}");
    }
    let dl = dir.join("dl.jsonl");
    let lines = || {
        std::fs::read_to_string(&dl)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .collect::<Vec<_>>()
    };
    let all_in = eventually(Duration::from_secs(20), || async { lines().len() >= POSTS }).await;
    assert!(all_in, "{:?}\n{:?}", lines(), relay.err.all());
    let lines = lines();
    assert_eq!(lines.len(), POSTS);
    for line in &lines {
        let error = line["error"].as_str().unwrap_or_default();
        assert!(error.contains("loopback address"), "{line}");
        assert!(error.contains("allow_destination_cidrs"), "{line}");
        // Final at once: one attempt, no retries.
        assert_eq!(line["attempts"], 1, "{line}");
    }
    assert_eq!(log.len(), 0, "the receiver was never reached");
    let warned = relay
        .err
        .all()
        .iter()
        .any(|l| l.contains("delivery failed") && l.contains("refused"));
    assert!(warned, "{:?}", relay.err.all());

    // Allowed, the same destination is delivered to.
    let dir = TempDir::new("private-allowed");
    let allow = ["--allow-destination-cidr", "127.0.0.0/8"];
    let (relay, log) = relay_to_localhost(&dir, &allow).await;
    for n in 0..POSTS {
        assert_eq!(relay.post(&[], &format!("{{\"n\":{n}}}")).await.0, 202);
    }
    assert!(
        log.until(Duration::from_secs(20), |h| h.len() >= POSTS)
            .await
    );
    assert_eq!(log.len(), POSTS);
    let dl = std::fs::read_to_string(dir.join("dl.jsonl")).unwrap_or_default();
    assert_eq!(dl.lines().count(), 0, "{dl}");
}
