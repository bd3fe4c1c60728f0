//! Disk faults: the dead-letter disk full, the journal directory made
//! unwritable (the relay run as an unprivileged user), the journal
//! directory deleted while running, the dead-letter file deleted while
//! running, and a corrupt byte in a journal segment between a SIGKILL and
//! a restart.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::invariant::Row;
use super::rx::{Plan, Rx};
use super::scenario::{Rss, Setup, kept, post, settle, start, stop};
use super::{Fault, N};
use crate::full_disk::FullDisk;
use crate::harness::{Relay, eventually, run_as};
use crate::unprivileged;

/// The disk faults.
pub(super) fn faults() -> Vec<Fault> {
    vec![
        Fault::new("dead-letter disk full", |n, _| Box::pin(full(n))),
        Fault::new("journal dir unwritable", |n, _| Box::pin(unwritable(n))),
        Fault::new("journal dir deleted", |n, _| Box::pin(journal_deleted(n))),
        Fault::new("dead-letter file deleted", |n, _| {
            Box::pin(dead_letter_deleted(n))
        }),
        Fault::new("corrupt byte after SIGKILL", |n, _| Box::pin(corrupt(n))),
    ]
}

/// Counts the run of `setup` (its relay exited) against `accepted`, with
/// `dead` the dead-lettered ids.
fn count(setup: &Setup, accepted: &[String], rx: &Rx, dead: &HashSet<String>, rss: &Rss) -> Row {
    let kept = kept(&setup.journal);
    Row::count(
        setup.name,
        accepted,
        &rx.delivered(),
        dead,
        &kept,
        rss.peak_kib(),
    )
}

/// The dead-letter file on a disk that fills right after the start: a
/// third of the webhooks are refused by the receiver and cannot be
/// dead-lettered (intake answers 503 meanwhile, only 202s count); then the
/// disk is freed and more are posted.
async fn full(name: &'static str) -> Row {
    let Some(disk) = FullDisk::new("fault-dl-full", "4m", "dead-letter.jsonl") else {
        return Row::skipped(name, "no tmpfs and no /dev/full");
    };
    let mut setup = Setup::new(name);
    setup.dead_letter = PathBuf::from(disk.file_arg());
    let rx = Rx::start(Plan::Refuse).await;
    let rss = Rss::default();
    let mut relay = start(&setup.args(&rx.url(), ""), &rss).await;
    disk.fill();
    let mut posted = post(relay.addr, name, 0, N / 2).await;
    // Full for a while: the lines wait in the journal, intake answers 503.
    tokio::time::sleep(Duration::from_secs(2)).await;
    posted.extend(post(relay.addr, name, N / 2, N / 2 + 10).await);
    disk.free();
    let back = eventually(Duration::from_secs(10), || async {
        relay.post(&[], "{\"fault\":\"probe\",\"n\":1}").await.0 == 202
    })
    .await;
    posted.extend(post(relay.addr, name, N, N + N / 2).await);
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    stop(&mut relay).await;
    let row = count(&setup, &posted.accepted, &rx, &setup.dead_lettered(), &rss);
    row.note(format!(
        "answers {}; 202 again once freed: {back}",
        posted.summary()
    ))
}

/// The relay runs as an unprivileged user; its journal directory is made
/// read-only for it while webhooks wait on a stalled receiver; it is
/// killed, cannot start again on the unwritable directory, and once the
/// directory is writable again it starts and delivers.
async fn unwritable(name: &'static str) -> Row {
    let Some(user) = unprivileged::user("fault-journal-unwritable") else {
        return Row::skipped(name, "needs root for an unprivileged user");
    };
    let setup = Setup::new(name);
    unprivileged::give(&setup.dir.0, user);
    let rx = Rx::start(Plan::Gated).await;
    let rss = Rss::default();
    let args = setup.args(&rx.url(), "").join(" ");
    let mut relay = Relay::start_as(&args, user).await;
    rss.watch(&relay);
    let mut posted = post(relay.addr, name, 0, N / 2).await;
    rx.open(false);
    unprivileged::mode(&setup.journal, "0500");
    posted.extend(post(relay.addr, name, N / 2, N).await);
    relay.kill().await;
    let mut again: Vec<&str> = vec!["--listen", "127.0.0.1:0"];
    again.extend(args.split_whitespace());
    let (code, _, err) = run_as(&again, user).await;
    let refused = err.lines().last().unwrap_or_default().to_owned();
    unprivileged::mode(&setup.journal, "0700");
    rx.open(true);
    let mut relay = Relay::start_as(&args, user).await;
    rss.watch(&relay);
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    stop(&mut relay).await;
    let row = count(&setup, &posted.accepted, &rx, &setup.dead_lettered(), &rss);
    row.note(format!(
        "answers {}; a start on the unwritable directory exited {code}: {refused}",
        posted.summary()
    ))
}

/// The journal directory is deleted while webhooks wait on a stalled
/// receiver; more are posted (503 until the journal has made its
/// directory again and journaled the unfinished ones there); then a
/// SIGKILL and a restart with the receiver answering.
async fn journal_deleted(name: &'static str) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(Plan::Gated).await;
    rx.open(false);
    let rss = Rss::default();
    let args = setup.args(&rx.url(), "");
    let mut relay = start(&args, &rss).await;
    let mut posted = post(relay.addr, name, 0, N / 2).await;
    std::fs::remove_dir_all(&setup.journal).expect("deleting the journal directory");
    let back = eventually(Duration::from_secs(10), || async {
        relay.post(&[], "{\"fault\":\"probe\",\"n\":1}").await.0 == 202
    })
    .await;
    posted.extend(post(relay.addr, name, N / 2, N).await);
    relay.kill().await;
    rx.open(true);
    let mut relay = start(&args, &rss).await;
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    stop(&mut relay).await;
    let row = count(&setup, &posted.accepted, &rx, &setup.dead_lettered(), &rss);
    row.note(format!("answers {}; 202 again: {back}", posted.summary()))
}

/// The dead-letter file is deleted once it holds the first half's refused
/// webhooks (read just before: an operator who deletes the file takes
/// those lines); the second half's must reach a file made again at the
/// path.
async fn dead_letter_deleted(name: &'static str) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(Plan::Refuse).await;
    let rss = Rss::default();
    let mut relay = start(&setup.args(&rx.url(), ""), &rss).await;
    let mut posted = post(relay.addr, name, 0, N / 2).await;
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    let mut dead = setup.dead_lettered();
    std::fs::remove_file(&setup.dead_letter).expect("deleting the dead-letter file");
    let before = dead.len();
    posted.extend(post(relay.addr, name, N / 2, N).await);
    settle(&setup, &posted.accepted, || {
        let mut all = rx.delivered();
        all.extend(dead.iter().cloned());
        all
    })
    .await;
    stop(&mut relay).await;
    let after = setup.dead_lettered();
    let note = format!(
        "answers {}; {before} lines taken with the deleted file, {} in the file made again",
        posted.summary(),
        after.len()
    );
    dead.extend(after);
    count(&setup, &posted.accepted, &rx, &dead, &rss).note(note)
}

/// The first half is delivered but for webhook 0, still being tried
/// (which keeps the delivered ones' records in the segment); the second
/// half waits on a stalled receiver when the relay is killed; one byte of
/// webhook 1's record (delivered) is flipped in its segment; the restart
/// must keep (and deliver) every record after it.
async fn corrupt(name: &'static str) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(Plan::Gated).await;
    let rss = Rss::default();
    let args = setup.args(&rx.url(), "");
    let mut relay = start(&args, &rss).await;
    let mut posted = post(relay.addr, name, 0, N / 2).await;
    let first = posted.accepted.clone();
    eventually(Duration::from_secs(10), || async {
        let done = rx.delivered();
        first.iter().filter(|id| done.contains(*id)).count() + 1 >= first.len()
    })
    .await;
    rx.open(false);
    posted.extend(post(relay.addr, name, N / 2, N).await);
    relay.kill().await;
    let flipped = flip(&setup.journal, &format!("{{\"fault\":\"{name}\",\"n\":1}}"));
    rx.open(true);
    let mut relay = start(&args, &rss).await;
    let skipped = relay
        .err
        .find(Duration::from_secs(5), |l| {
            let l = plain(l);
            l.contains("skipped=") && !l.contains("skipped=0")
        })
        .await
        .is_some();
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    stop(&mut relay).await;
    let damaged = files(&setup.journal, ".seg.damaged").len();
    let row = count(&setup, &posted.accepted, &rx, &setup.dead_lettered(), &rss);
    assert!(
        flipped.is_some(),
        "{name}: webhook 1's record was not found"
    );
    row.note(format!(
        "answers {}; flipped a byte in {}; skip logged: {skipped}; {damaged} .seg.damaged",
        posted.summary(),
        flipped.unwrap_or_default()
    ))
}

/// The files in `dir` whose names end with `suffix`.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

/// Flips one byte in the middle of `needle` in the segment holding it:
/// that segment's name.
fn flip(journal: &Path, needle: &str) -> Option<String> {
    for seg in files(journal, ".seg") {
        let mut bytes = std::fs::read(&seg).ok()?;
        let Some(at) = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
        else {
            continue;
        };
        bytes[at + needle.len() / 2] ^= 0x20;
        std::fs::write(&seg, &bytes).expect("writing the segment back");
        return seg.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    None
}

/// A log line without its colours (`ESC[…m`).
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}
