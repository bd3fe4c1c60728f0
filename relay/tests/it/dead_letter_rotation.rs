//! The dead-letter file rotates at `--dead-letter-max-bytes` and keeps
//! `--dead-letter-keep` files (the live one and `FILE.1`, `FILE.2`, …,
//! oldest first); once all are full, intake answers 503
//! `dead-letter-full` and nothing is written or deleted, until the
//! operator moves a rotated file away.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir};
use crate::letters::{Answer, ids_in, lines, refusing, send};
use crate::receivers::Log;

const MAX_BYTES: u64 = 2048;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_files_rotate_and_a_full_set_is_a_503_never_a_deletion() {
    let log = Arc::new(Log::default());
    let rx = refusing(log.clone()).await;
    let dir = TempDir::new("dl-rotate");
    let dl = dir.join("dead-letter.jsonl");
    let rotated = |n: u32| PathBuf::from(format!("{}.{n}", dl.display()));
    let mut relay = Relay::start(&format!(
        "--downstream http://{rx}/hooks --retries 0 --journal-dir {} --dead-letter-file {} \
         --dead-letter-max-bytes {MAX_BYTES} --dead-letter-keep 2",
        dir.arg("journal"),
        dl.display()
    ))
    .await;

    // One at a time, each refused by the receiver before the next, until
    // intake says the files are full (a line is ~150 bytes: ~13 a file).
    let mut accepted: HashSet<String> = HashSet::new();
    let mut full: Option<Answer> = None;
    for n in 0..100 {
        let a = send(&relay, &log, n).await;
        if a.is_503("dead-letter-full") {
            full = Some(a);
            break;
        }
        let id =
            a.id.clone()
                .unwrap_or_else(|| panic!("webhook {n} answered {a:?}"));
        accepted.insert(id);
    }
    let sizes: Vec<u64> = [dl.clone(), rotated(1), rotated(2)]
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .collect();
    let written = ids_in(&[&dl, &rotated(1)]);
    let lines_now = lines(&dl).0.len() + lines(&rotated(1)).0.len();
    let m = relay.metrics().await;
    println!(
        "dead_letter_rotation: {} accepted, {} written in 2 files of {sizes:?} bytes, 503 full: {}",
        accepted.len(),
        written.len(),
        full.is_some()
    );
    let a = full.expect("503 dead-letter-full once both files are full");
    assert!(a.retry_after.is_some_and(|s| s >= 1), "{a:?}");
    assert!(sizes[0] > 0 && sizes[1] > 0, "two files: {sizes:?}");
    assert!(sizes[0] <= MAX_BYTES && sizes[1] <= MAX_BYTES, "{sizes:?}");
    assert_eq!(sizes[2], 0, "no third file: {sizes:?}");
    assert!(
        written.len() < accepted.len(),
        "the line that did not fit is held"
    );
    assert!(written.iter().all(|id| accepted.contains(id)));
    assert_eq!(
        m.get("dripfeed_relay_dead_letter_lines", &[]),
        lines_now as f64
    );
    assert!(m.get("dripfeed_relay_dead_letter_write_failures_total", &[]) >= 1.0);

    // The operator moves the oldest file away (to redrive it): room for
    // one more, the held line is written, intake answers 202 again.
    let moved = dir.join("moved.jsonl");
    std::fs::rename(rotated(1), &moved).expect("moving the rotated file");
    let mut back = None;
    for n in 100..300 {
        let a = send(&relay, &log, n).await;
        if let Some(id) = a.id {
            accepted.insert(id.clone());
            back = Some(id);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back.is_some(), "202 again once a file was moved away");
    let all = [dl.clone(), rotated(1), rotated(2), moved.clone()];
    let paths: Vec<&std::path::Path> = all.iter().map(|p| p.as_path()).collect();
    let found = crate::harness::eventually(Duration::from_secs(10), || async {
        let log_has = log
            .hits()
            .iter()
            .filter(|h| accepted.contains(&h.key))
            .count();
        log_has == accepted.len() && ids_in(&paths).len() == accepted.len()
    })
    .await;
    let kept = ids_in(&paths);
    assert!(
        found,
        "every 202 in a file: {} of {}",
        kept.len(),
        accepted.len()
    );
    assert!(
        std::fs::metadata(&moved).is_ok_and(|m| m.len() > 0),
        "nothing deleted"
    );
    relay.signal("TERM");
    relay.exit(Duration::from_secs(30)).await;
}
