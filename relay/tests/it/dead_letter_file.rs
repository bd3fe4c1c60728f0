//! The dead-letter file's path is what counts: a file deleted while the
//! relay runs is noticed and made again at its path (lines no longer go to
//! the unlinked file), a file moved aside keeps what it had while new lines
//! go to a new file at the path, and a path that cannot be made again (its
//! directory unwritable for the relay's user) is a 503
//! `dead-letter-unavailable` until it can.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually};
use crate::letters::{Answer, ids_in, lines, refusing, send};
use crate::receivers::Log;
use crate::unprivileged;

/// Sends webhooks `from..to` (see `letters::send`), each answered 202;
/// their ids.
async fn send_refused(relay: &Relay, log: &Log, from: u64, to: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for n in from..to {
        let a = send(relay, log, n).await;
        ids.push(
            a.id.clone()
                .unwrap_or_else(|| panic!("webhook {n} answered {a:?}")),
        );
    }
    ids
}

/// Waits until the file at `path` holds every id of `ids` (at most 10 s);
/// how many of them it holds.
async fn kept(path: &Path, ids: &[String]) -> usize {
    let count = || {
        let found = ids_in(&[path]);
        ids.iter().filter(|id| found.contains(*id)).count()
    };
    eventually(Duration::from_secs(10), || async { count() == ids.len() }).await;
    count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_dead_letter_file_is_made_again_at_its_path() {
    let log = Arc::new(Log::default());
    let rx = refusing(log.clone()).await;
    let dir = TempDir::new("dl-deleted");
    let dl = dir.join("dead-letter.jsonl");
    let mut relay = Relay::start(&format!(
        "--downstream http://{rx}/hooks --retries 0 --journal-dir {} --dead-letter-file {}",
        dir.arg("journal"),
        dl.display()
    ))
    .await;
    let first = send_refused(&relay, &log, 0, 5).await;
    assert_eq!(kept(&dl, &first).await, 5, "written before the delete");

    std::fs::remove_file(&dl).expect("deleting the dead-letter file");
    let after = send_refused(&relay, &log, 5, 15).await;
    let kept_after_delete = kept(&dl, &after).await;
    println!(
        "dead_letter_file: deleted while running: {kept_after_delete} of {} kept",
        after.len()
    );
    assert_eq!(
        kept_after_delete,
        after.len(),
        "lines after the delete, at the path"
    );

    // Moved aside (to redrive it): what it had stays there, new lines go
    // to a new file at the path.
    let moved = dir.join("moved.jsonl");
    let before_move = lines(&dl).0.len();
    std::fs::rename(&dl, &moved).expect("moving the dead-letter file");
    let later = send_refused(&relay, &log, 15, 20).await;
    let kept_after_move = kept(&dl, &later).await;
    println!(
        "dead_letter_file: moved aside: {kept_after_move} of {} at the path, {} of {before_move} \
         in the moved file",
        later.len(),
        lines(&moved).0.len()
    );
    assert_eq!(
        kept_after_delete,
        after.len(),
        "lines after the delete, at the path"
    );
    assert_eq!(
        kept_after_move,
        later.len(),
        "lines after the move, at the path"
    );
    assert_eq!(
        lines(&moved).0.len(),
        before_move,
        "the moved file keeps its lines"
    );
    let gauge = relay
        .metrics()
        .await
        .get("dripfeed_relay_dead_letter_lines", &[]);
    assert_eq!(gauge, later.len() as f64, "lines in the file at the path");
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_dead_letter_directory_is_a_503_until_it_is_writable() {
    let test = "dead_letter_file_permissions";
    let Some(user) = unprivileged::user(test) else {
        return;
    };
    let log = Arc::new(Log::default());
    let rx = refusing(log.clone()).await;
    let dir = TempDir::new("dl-perm");
    let letters = dir.join("letters");
    std::fs::create_dir(&letters).expect("the dead-letter directory");
    unprivileged::give(&dir.0, user);
    let dl = letters.join("dead-letter.jsonl");
    let mut relay = Relay::start_as(
        &format!(
            "--downstream http://{rx}/hooks --retries 0 --journal-dir {} --dead-letter-file {}",
            dir.arg("journal"),
            dl.display()
        ),
        user,
    )
    .await;
    let first = send_refused(&relay, &log, 0, 3).await;
    assert_eq!(kept(&dl, &first).await, 3, "written as {user:?}");

    // The file is deleted and its directory made read-only for the
    // relay's user: it cannot make the file again.
    unprivileged::mode(&letters, "0555");
    std::fs::remove_file(&dl).expect("deleting the dead-letter file");
    let mut accepted: HashSet<String> = HashSet::new();
    let mut refused: Option<Answer> = None;
    for n in 3..40 {
        let a = send(&relay, &log, n).await;
        if let Some(id) = &a.id {
            accepted.insert(id.clone());
        }
        if a.is_503("dead-letter-unavailable") {
            refused = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failures = relay
        .metrics()
        .await
        .get("dripfeed_relay_dead_letter_write_failures_total", &[]);

    // Writable again: the held lines are written, intake answers 202.
    unprivileged::mode(&letters, "0755");
    let mut back = false;
    for n in 40..200 {
        let a = send(&relay, &log, n).await;
        if let Some(id) = a.id {
            accepted.insert(id);
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let accepted: Vec<String> = accepted.into_iter().collect();
    let kept_now = kept(&dl, &accepted).await;
    println!(
        "{test}: after the delete, {} accepted, {kept_now} in the file made again; 503 while \
         unwritable: {}; {failures} write failures counted",
        accepted.len(),
        refused.is_some()
    );
    assert_eq!(
        kept_now,
        accepted.len(),
        "lost {} of {}",
        accepted.len() - kept_now,
        accepted.len()
    );
    let a = refused.expect("503 dead-letter-unavailable while the directory is unwritable");
    assert!(a.retry_after.is_some_and(|s| s >= 1), "{a:?}");
    assert!(failures >= 1.0, "write failures counted: {failures}");
    assert!(back, "202 again once the directory is writable");
    relay.signal("TERM");
    relay.exit(Duration::from_secs(30)).await;
}
