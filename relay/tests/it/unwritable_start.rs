//! A relay that cannot write where it must keep webhooks refuses to start
//! (exit code 1) and names the path it could not write: run as an
//! unprivileged user (root ignores permissions) against a root-owned 0700
//! directory, and a sticky shared directory holding another user's files.

use std::path::Path;

use crate::harness::{LOOPBACK, TempDir, run_as};
use crate::unprivileged;

/// Runs the relay as `user` with `args` after a destination; exit code and stderr.
async fn start(user: (u32, u32), args: &[&str]) -> (i32, String) {
    let mut all = LOOPBACK.to_vec();
    all.extend(["--downstream", "http://127.0.0.1:9/hooks"]);
    all.extend_from_slice(args);
    let (code, _, err) = run_as(&all, user).await;
    (code, err)
}

fn text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_journal_or_dead_letter_path_at_start_is_named() {
    let test = "unwritable_start";
    let Some(user) = unprivileged::user(test) else {
        return;
    };
    let open = TempDir::new("unwritable-open");
    unprivileged::give(&open.0, user);
    let locked = TempDir::new("unwritable-0700");
    unprivileged::mode(&locked.0, "0700");
    let own_dl = open.arg("dead-letter.jsonl");

    let mut cases: Vec<(String, Vec<String>, String)> = Vec::new();
    let journal_in = text(&locked.join("journal"));
    cases.push((
        "a journal directory to make in a root-owned 0700 directory".into(),
        vec![
            "--journal-dir".into(),
            journal_in.clone(),
            "--dead-letter-file".into(),
            own_dl.clone(),
        ],
        journal_in,
    ));
    cases.push((
        "a root-owned 0700 journal directory".into(),
        vec![
            "--journal-dir".into(),
            text(&locked.0),
            "--dead-letter-file".into(),
            own_dl.clone(),
        ],
        text(&locked.0),
    ));
    let dl_in = text(&locked.join("dead-letter.jsonl"));
    cases.push((
        "a dead-letter file in a root-owned 0700 directory".into(),
        vec![
            "--journal-dir".into(),
            open.arg("journal"),
            "--dead-letter-file".into(),
            dl_in.clone(),
        ],
        dl_in,
    ));
    // A shared sticky directory (like /tmp) where another user (root) owns
    // the idempotency keys' file: a data directory others can write, which
    // this user cannot make its own ("Operation not permitted"), named.
    let sticky = TempDir::new("unwritable-sticky");
    unprivileged::mode(&sticky.0, "1777");
    for name in ["LOCK", "idempotency.jsonl"] {
        let p = sticky.join(name);
        std::fs::write(&p, b"").expect("a root-owned file");
        unprivileged::mode(&p, "0666");
    }
    let keys = text(&sticky.0);
    cases.push((
        "a root-owned idempotency file in a sticky journal directory".into(),
        vec![
            "--journal-dir".into(),
            text(&sticky.0),
            "--dead-letter-file".into(),
            own_dl.clone(),
        ],
        keys,
    ));

    let mut unnamed = Vec::new();
    for (what, args, path) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = start(user, &args).await;
        println!("{test}: {what}: exit {code}: {}", err.trim());
        assert_ne!(code, 0, "{what}: the relay started");
        if !err.contains(path.as_str()) {
            unnamed.push(format!("{what}: {:?} does not name {path}", err.trim()));
        }
    }
    assert!(
        unnamed.is_empty(),
        "{} of {} errors without their path:\n{}",
        unnamed.len(),
        cases.len(),
        unnamed.join("\n")
    );
}
