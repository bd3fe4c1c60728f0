//! A full disk under the dead-letter file loses nothing: a webhook whose
//! dead-letter line cannot be written stays in the journal (a restart on
//! the same journal dead-letters it again), intake answers 503
//! `dead-letter-unavailable` with a `Retry-After` while the disk is full
//! (the failures counted in `dripfeed_relay_dead_letter_write_failures_total`),
//! and 202 again once space is freed, when the lines held are written.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::full_disk::FullDisk;
use crate::harness::{Relay, TempDir, eventually};
use crate::letters::{Answer, lines, refusing};
use crate::receivers::Log;

/// Webhooks sent one at a time while the disk is full (the 28).
const SENT: u64 = 28;

/// Sends webhook `n` (see `letters::send`), noting its id when accepted.
async fn send(relay: &Relay, log: &Log, n: u64, accepted: &mut HashSet<String>) -> Answer {
    let a = crate::letters::send(relay, log, n).await;
    accepted.extend(a.id.clone());
    a
}

/// Posts until an answer is a 503 of `kind` (at most `limit`); it.
async fn until_503(
    relay: &Relay,
    log: &Log,
    n: &mut u64,
    kind: &str,
    limit: Duration,
    accepted: &mut HashSet<String>,
) -> Option<Answer> {
    let until = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < until {
        *n += 1;
        let a = send(relay, log, *n, accepted).await;
        if a.is_503(kind) {
            return Some(a);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_keeps_each_202_until_its_dead_letter_line_is_written() {
    let test = "dead_letter_disk";
    let Some(disk) = FullDisk::new(test, "4m", "dead-letter.jsonl") else {
        return;
    };
    let log = Arc::new(Log::default());
    let rx = refusing(log.clone()).await;
    let dir = TempDir::new("full-disk");
    let dl = disk.file_arg();
    let args = format!(
        "--downstream http://{rx}/hooks --retries 0 --shutdown-grace 1s \
         --journal-dir {} --dead-letter-file {dl}",
        dir.arg("journal")
    );
    let mut relay = Relay::start(&args).await;
    disk.fill();

    // The disk is full: the 28 of the issue, one at a time.
    let mut accepted = HashSet::new();
    let mut answers = Vec::new();
    for n in 0..SENT {
        answers.push(send(&relay, &log, n, &mut accepted).await);
    }
    let mut n = SENT;
    let full_503 = until_503(
        &relay,
        &log,
        &mut n,
        "dead-letter-unavailable",
        Duration::from_secs(10),
        &mut accepted,
    )
    .await;
    let failures = relay
        .metrics()
        .await
        .get("dripfeed_relay_dead_letter_write_failures_total", &[]);
    let (written_before_kill, _) = lines(std::path::Path::new(&dl));
    relay.kill().await;

    // Restarted on the same journal, the disk still full: the webhooks
    // kept there are dead-lettered again and their lines held.
    let mut relay = Relay::start(&args).await;
    let recovered = relay
        .out
        .find(Duration::from_secs(5), |l| {
            l.contains(" unfinished webhooks")
        })
        .await
        .and_then(|l| {
            l.split("recovered ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(0);
    let again_503 = until_503(
        &relay,
        &log,
        &mut n,
        "dead-letter-unavailable",
        Duration::from_secs(10),
        &mut accepted,
    )
    .await;

    // Space freed: the held lines are written and intake answers 202 again.
    disk.free();
    let mut after_free = None;
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < until {
        n += 1;
        let a = send(&relay, &log, n, &mut accepted).await;
        let ok = a.status == 202;
        after_free = Some(a);
        if ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let back = after_free.as_ref().is_some_and(|a| a.status == 202);
    let path = std::path::Path::new(&dl);
    eventually(Duration::from_secs(20), || async {
        let (ids, _) = lines(path);
        let ids: HashSet<String> = ids.into_iter().collect();
        accepted.iter().all(|id| ids.contains(id))
    })
    .await;
    let (ids, torn) = lines(path);
    let line_count = ids.len();
    let found: HashSet<String> = ids.into_iter().collect();
    let lost = accepted.iter().filter(|id| !found.contains(*id)).count();
    let first_202s = answers.iter().filter(|a| a.status == 202).count();
    let first_lost = answers
        .iter()
        .filter_map(|a| a.id.as_ref())
        .filter(|id| !found.contains(*id))
        .count();
    println!(
        "{test}: of the first {SENT} sent while the disk was full, {first_202s} answered 202, \
         {first_lost} lost; in all {} accepted, {} in the dead-letter file, lost {lost}; {} written before the kill, {recovered} recovered from the journal, \
         {failures} write failures counted, {torn} torn lines",
        accepted.len(),
        found.len(),
        written_before_kill.len(),
    );
    assert_eq!(
        lost,
        0,
        "lost {lost} of {} webhooks answered 202",
        accepted.len()
    );
    assert_eq!(torn, 0, "every line whole");

    let a = full_503.expect("intake answers 503 dead-letter-unavailable while the disk is full");
    assert!(a.retry_after.is_some_and(|s| s >= 1), "{a:?}");
    assert!(failures >= 1.0, "write failures counted: {failures}");
    assert!(
        recovered + written_before_kill.len() >= first_202s,
        "kept in the journal: {recovered} recovered, {} written, {first_202s} accepted",
        written_before_kill.len()
    );
    assert!(
        again_503.is_some(),
        "503 again after the restart, the disk still full"
    );
    assert!(back, "202 again once space is freed: {after_free:?}");
    let m = relay.metrics().await;
    let gauge = m.get("dripfeed_relay_dead_letter_lines", &[]);
    assert_eq!(gauge, line_count as f64, "the lines gauge");
    relay.signal("TERM");
    relay.exit(Duration::from_secs(30)).await;
}
