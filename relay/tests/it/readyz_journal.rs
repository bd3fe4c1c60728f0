//! Readiness tells the truth about the journal: with its disk full, intake
//! answers 503 (it cannot write its journal) and so does `/readyz`, naming
//! the journal, with `dripfeed_relay_down{part="journal"}` 1 and one log
//! line for the episode (not one per refused batch); once the disk is
//! freed, it is ready again within seconds with nothing posted (the
//! journal probes), says so once, and takes webhooks. Before, `/readyz`
//! answered 200 throughout and the log had an ERROR per batch.

use std::time::Duration;

use crate::full_disk::FullDisk;
use crate::harness::{Relay, TempDir, eventually, http};
use crate::unprivileged::in_ci;

/// `/readyz`'s status and body.
async fn readyz(relay: &Relay) -> (u16, String) {
    let resp = http().get(relay.admin_url("/readyz")).send().await.unwrap();
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_the_journal_while_its_disk_is_full() {
    let test = "readyz_names_the_journal_while_its_disk_is_full";
    let Some(disk) = FullDisk::new("readyz-journal", "8m", "unused") else {
        return;
    };
    if !disk.is_tmpfs() {
        assert!(!in_ci(), "{test}: needs a tmpfs, and CI=true");
        eprintln!("{test}: skipped: mount -t tmpfs not permitted");
        return;
    }
    // The dead-letter file elsewhere: only the journal's disk fills.
    let other = TempDir::new("readyz-journal-dl");
    let relay = Relay::start(&format!(
        "--downstream http://127.0.0.1:9/h --journal-dir {} --dead-letter-file {} --retries 0",
        disk.arg("journal"),
        other.arg("dl.jsonl")
    ))
    .await;
    assert_eq!(readyz(&relay).await.0, 200);
    disk.fill();
    // Until a batch finds no room (the first may fit in a page left).
    let mut refused = 0;
    for n in 0..200 {
        let (status, body) = relay
            .post(
                &[("content-type", "application/json")],
                &format!("{{\"n\":{n}}}"),
            )
            .await;
        if status == 503 {
            assert!(
                body["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("journal"),
                "{body}"
            );
            refused += 1;
            if refused == 50 {
                break;
            }
        }
    }
    assert_eq!(refused, 50, "intake refuses while the journal cannot write");
    let (status, body) = readyz(&relay).await;
    assert_eq!(status, 503, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!(v["down"][0]["name"], "journal", "{body}");
    let metrics = relay.metrics().await;
    assert_eq!(
        metrics.get("dripfeed_relay_down", &[("part", "journal")]),
        1.0
    );
    assert_eq!(metrics.get("dripfeed_relay_ready", &[]), 0.0);
    let episodes = |what: &'static str| relay.err.all().iter().filter(|l| l.contains(what)).count();
    assert_eq!(
        episodes("journal: writing fails"),
        1,
        "{:?}",
        relay.err.all()
    );

    disk.free();
    let ready = eventually(Duration::from_secs(10), || async {
        readyz(&relay).await.0 == 200
    })
    .await;
    assert!(
        ready,
        "ready again without a webhook posted: {:?}",
        readyz(&relay).await
    );
    let told = relay
        .err
        .find(Duration::from_secs(5), |l| {
            l.contains("journal: writes succeed again")
        })
        .await;
    assert!(told.is_some(), "{:?}", relay.err.all());
    assert_eq!(episodes("journal: writes succeed again"), 1);
    assert_eq!(
        relay
            .metrics()
            .await
            .get("dripfeed_relay_down", &[("part", "journal")]),
        0.0
    );
    let (status, body) = relay
        .post(&[("content-type", "application/json")], "{\"n\":1000}")
        .await;
    assert_eq!(status, 202, "{body}");
}
