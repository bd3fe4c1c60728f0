//! The receivers the book shows (`docs/examples/receiver.py` and
//! `receiver.mjs`, included in "Sending and receiving webhooks"), run
//! against a real relay: every webhook signed with the destination's
//! secret is verified (also while the secret is being replaced: the
//! receiver knows only the old one), and one signed with another secret is
//! refused with 401, so the relay dead-letters it without a retry.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Lines, Relay, TempDir, eventually};

const OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEW: &str = "whsec_c2VjcmV0LWJlaW5nLXJlcGxhY2VkLW5vdw==";
const OTHER: &str = "whsec_b3RoZXItc2VjcmV0LW5vdC10aGUtcmVjZWl2ZXJz";

/// Whether `program` runs here; under `CI=true` it must.
fn available(program: &str) -> bool {
    let ok = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is missing (scripts/test.sh installs it)"
        );
        eprintln!("skipped: {program} is missing");
    }
    ok
}

/// Runs the book's receiver with `interpreter` against a relay.
async fn receiver_verifies_the_relays_signatures(interpreter: &str, file: &str) {
    if !available(interpreter) {
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/examples")
        .join(file);
    let mut child = tokio::process::Command::new(interpreter)
        .arg(&script)
        .arg("0")
        .env("WEBHOOK_SECRET", OLD)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{interpreter} {}: {e}", script.display()));
    let out = Arc::new(Lines::default());
    out.follow(child.stdout.take().expect("piped"));
    let listening = out
        .find(Duration::from_secs(30), |l| l.starts_with("listening on "))
        .await
        .unwrap_or_else(|| panic!("{file} never listened: {:?}", out.all()));
    let port: u16 = listening["listening on ".len()..]
        .trim()
        .parse()
        .expect("a port");

    let dir = TempDir::new("doc-receivers");
    let destinations = dir.join("destinations.toml");
    std::fs::write(
        &destinations,
        format!(
            "[[destinations]]\nname = \"signed\"\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret = \"{OLD}\"\n\n\
             [[destinations]]\nname = \"rotating\"\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret = \"{NEW}\"\nprevious_secret = \"{OLD}\"\n\n\
             [[destinations]]\nname = \"forged\"\nurl = \"http://127.0.0.1:{port}/hooks\"\nsecret = \"{OTHER}\"\n"
        ),
    )
    .unwrap();
    let relay = Relay::start(&format!(
        "--destinations {} --no-journal --dead-letter-file {} --retries 2 --retry-min 100ms",
        destinations.display(),
        dir.arg("dead-letter.jsonl"),
    ))
    .await;

    let mut sent = Vec::new();
    for (n, destination) in ["signed", "signed", "rotating", "forged", "signed", "forged"]
        .into_iter()
        .enumerate()
    {
        let body = format!("{{\"order\":{n},\"note\":\"naïve\"}}");
        let (status, answer) = relay
            .post(
                &[
                    ("x-destination", destination),
                    ("content-type", "application/json"),
                ],
                &body,
            )
            .await;
        assert_eq!(status, 202, "{answer}");
        let id = answer["id"].as_str().expect("an id").to_owned();
        sent.push((destination, id, body));
    }
    for (destination, id, body) in &sent {
        let want = match *destination {
            "forged" => format!("invalid {id}"),
            _ => format!("valid {id} {body}"),
        };
        let found = out.find(Duration::from_secs(30), |l| l == want).await;
        assert!(
            found.is_some(),
            "{file}: no line {want:?} in {:?}",
            out.all()
        );
    }
    // A refused signature is a 401: final, dead-lettered after one attempt.
    // (The receiver prints its line before it answers: the relay counts
    // the answer a moment later.)
    let counts = |m: crate::harness::Metrics| {
        let jobs = |d: &str, outcome: &str| {
            m.get(
                "leaky_bucket_jobs_total",
                &[("destination", d), ("outcome", outcome)],
            )
        };
        let dead = jobs("forged", "dead_lettered");
        (
            dead,
            jobs("signed", "delivered") + jobs("rotating", "delivered"),
        )
    };
    eventually(Duration::from_secs(10), || async {
        let (dead, delivered) = counts(relay.metrics().await);
        dead + delivered >= 6.0
    })
    .await;
    let (dead, delivered) = counts(relay.metrics().await);
    assert_eq!(dead, 2.0, "{file}");
    assert_eq!(delivered, 4.0, "{file}");
    let invalid = out
        .all()
        .iter()
        .filter(|l| l.starts_with("invalid "))
        .count();
    assert_eq!(invalid, 2, "one attempt each: {:?}", out.all());
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_receiver_verifies_what_the_relay_signs() {
    receiver_verifies_the_relays_signatures("python3", "receiver.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_receiver_verifies_what_the_relay_signs() {
    receiver_verifies_the_relays_signatures("node", "receiver.mjs").await;
}
