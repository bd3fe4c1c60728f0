//! The journal from outside: recovery with the same ids, torn tails cut,
//! the size bound, the directory lock, space given back, and dead-letter
//! ends recorded only after the sink's flush. Faults have their own files:
//! damaged segments and the first format (`journal/damage.rs`), the
//! directory deleted while running (`journal/lost_dir.rs`), a dead-letter
//! sink that cannot store (`journal/dead_letter_flush.rs`); the group
//! commits counted (`journal/syncs.rs`).
//!
//! A crash is simulated by copying the journal's files while the process
//! runs (after a flush): what a killed process would leave on disk. The
//! relay test kills a real process.
//!
//! These run in real time: admission waits for the journal's writer thread,
//! and tokio's paused clock would jump to the next timer meanwhile. They
//! wait for events (a count of deliveries, a shutdown), never for a time.

use crate::support;

#[path = "journal/attempts.rs"]
mod attempts;
#[path = "journal/cancelled.rs"]
mod cancelled;
#[path = "journal/damage.rs"]
mod damage;
#[path = "journal/dead_letter_flush.rs"]
mod dead_letter_flush;
#[path = "journal/lost_dir.rs"]
mod lost_dir;
#[path = "journal/syncs.rs"]
mod syncs;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::journal::{Durability, Journal, JournalError};
use dripfeed::{Attempt, ChannelSink, Delivery, Outcome, Reason, RetryPolicy, Throttle};

/// A directory of its own for one test, removed when dropped (so a run
/// leaves nothing in the temporary directory; a failed test's is kept
/// until the next run of it clears it first).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn fresh_dir(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("dripfeed-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Scratch(dir)
}

/// What a process killed now would leave: the segment files as they are.
fn snapshot(from: &Path, name: &str) -> Scratch {
    let to = fresh_dir(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "seg") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
    to
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    out.sort();
    out
}

/// The journal's stats once the ends of deliveries that already ran are
/// written: a delivery's end is sent just after the downstream returns.
async fn settled(journal: &Journal) -> dripfeed::journal::JournalStats {
    for _ in 0..1000 {
        journal.flush().await;
        if journal.stats().live == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    journal.flush().await;
    journal.stats()
}

/// Deliveries seen, `(id, job)`, with a way to wait for a count of them.
#[derive(Default)]
struct Seen {
    jobs: Mutex<Vec<(u64, String)>>,
    more: tokio::sync::Notify,
}

impl Seen {
    fn jobs(&self) -> Vec<(u64, String)> {
        self.jobs.lock().unwrap().clone()
    }

    /// Waits (at most 30 s) until `n` deliveries were seen.
    async fn reach(&self, n: usize) {
        let enough = || self.jobs.lock().unwrap().len() >= n;
        if !support::until(&self.more, Duration::from_secs(30), enough).await {
            panic!("saw {} deliveries, expected {n}", self.jobs().len());
        }
    }
}

fn recorder() -> (
    Arc<Seen>,
    impl Fn(&String, Attempt) -> std::future::Ready<Delivery> + Send + Sync + 'static,
) {
    let seen = Arc::new(Seen::default());
    let log = seen.clone();
    let deliver = move |job: &String, attempt: Attempt| {
        log.jobs.lock().unwrap().push((attempt.id(), job.clone()));
        log.more.notify_waiters();
        std::future::ready(Delivery::Done)
    };
    (seen, deliver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loses_no_admitted_job_and_ids_survive() {
    let dir = fresh_dir("crash");
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(100)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push((
            throttle.submit(format!("job-{i}")).await.unwrap().id(),
            format!("job-{i}"),
        ));
    }
    let crashed = snapshot(&dir, "crash-copy");

    let (seen, deliver) = recorder();
    let journal = Journal::open(&crashed).unwrap();
    assert_eq!(journal.recovered(), 50);
    let (again, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .capacity(10)
        .journal(journal)
        .build(deliver)
        .unwrap();
    again.pause();
    // Recovered jobs wait outside the bound: 10 new ones still fit.
    for i in 0..10 {
        again.try_submit(format!("new-{i}")).unwrap();
    }
    again.resume();
    seen.reach(60).await;
    let seen = seen.jobs();
    assert_eq!(seen.len(), 60);
    assert_eq!(
        seen[..50],
        ids[..],
        "recovered first, in order, with their ids"
    );
    assert!(seen[50..].iter().all(|(_, j)| j.starts_with("new-")));
    let journal = again.journal().unwrap().clone();
    let report = again.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.delivered(), 60);
    assert_eq!(
        journal.stats().live,
        0,
        "every delivery ended in the journal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_is_cut_at_every_offset_and_the_rest_recovered() {
    let dir = fresh_dir("torn");
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1.0)
        .capacity(5)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    for i in 0..5 {
        throttle.submit(format!("job-{i}")).await.unwrap();
    }
    let whole = snapshot(&dir, "torn-whole");
    let seg = segments(&whole).pop().unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    // The last record: "job-4" is 5 bytes, plus 21 of framing.
    let last = bytes.len() - 26;
    for cut in last..bytes.len() {
        let torn = snapshot(&whole, "torn-cut");
        let seg = segments(&torn).pop().unwrap();
        std::fs::write(&seg, &bytes[..cut]).unwrap();
        let journal = Journal::open(&torn).unwrap();
        assert_eq!(journal.recovered(), 4, "cut at {cut}");
        assert_eq!(journal.stats().cut, (cut - last) as u64);
        drop(journal);
        // Cut for good: a second open finds nothing more to cut.
        let journal = Journal::open(&torn).unwrap();
        assert_eq!((journal.recovered(), journal.stats().cut), (4, 0));
    }
    // Garbage after the last record is cut too.
    let garbled = snapshot(&whole, "torn-garbage");
    let seg = segments(&garbled).pop().unwrap();
    let mut junk = bytes.clone();
    junk.extend_from_slice(&[0xAB; 40]);
    std::fs::write(&seg, &junk).unwrap();
    assert_eq!(Journal::open(&garbled).unwrap().recovered(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_journal_refuses_with_503_and_loses_nothing() {
    let dir = fresh_dir("full");
    let journal = Journal::options().max_bytes(2000).open(&dir).unwrap();
    let (seen, deliver) = recorder();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .capacity(1000)
        .journal(journal)
        .build(deliver)
        .unwrap();
    throttle.pause();
    let (mut admitted, mut refused) = (0, Vec::new());
    for i in 0..200 {
        match throttle.submit(format!("job-{i:03}")).await {
            Ok(_) => admitted += 1,
            Err(r) => {
                assert_eq!(
                    r.reason(),
                    Reason::Unavailable {
                        cause: dripfeed::Cause::JournalFull
                    }
                );
                assert_eq!(r.status(), 503);
                assert!(r.retry_after().is_some());
                refused.push(r.into_job());
            }
        }
    }
    assert!(admitted > 50 && admitted < 120, "admitted {admitted}");
    assert_eq!(
        refused.len(),
        200 - admitted,
        "every refused job handed back"
    );
    throttle.resume();
    seen.reach(admitted).await;
    // Delivered jobs give their space back, so admission works again.
    assert_eq!(settled(throttle.journal().unwrap()).await.live, 0);
    assert!(throttle.submit("after".to_string()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_in_use_is_refused() {
    let dir = fresh_dir("lock");
    let first = Journal::open(&dir).unwrap();
    match Journal::open(&dir) {
        Err(JournalError::Locked { dir: d }) => assert_eq!(d, dir.to_path_buf()),
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(first);
    assert!(
        Journal::open(&dir).is_ok(),
        "released when the journal closes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_give_their_space_back_even_behind_a_long_lived_one() {
    let dir = fresh_dir("reclaim");
    let journal = Journal::options()
        .segment_bytes(4096)
        .durability(Durability::Written)
        .open(&dir)
        .unwrap();
    let (seen, record) = recorder();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100_000.0)
        .capacity(2000)
        .retries(RetryPolicy::new(2).backoff(Duration::from_secs(3600), Duration::from_secs(3600)))
        .journal(journal)
        .build(move |job: &String, attempt: Attempt| {
            let stuck = job == "stuck";
            let done = record(job, attempt);
            async move {
                if stuck {
                    Delivery::Retry { after: None }
                } else {
                    done.await
                }
            }
        })
        .unwrap();
    throttle.submit("stuck".to_string()).await.unwrap();
    for i in 0..3000 {
        throttle.submit(format!("job-{i:05}")).await.unwrap();
    }
    seen.reach(3001).await; // the stuck job's first try is recorded too
    let journal = throttle.journal().unwrap().clone();
    let stats = settled(&journal).await;
    assert_eq!(stats.live, 1, "only the stuck job is unfinished");
    assert!(stats.segments <= 3, "segments {}", stats.segments);
    assert!(stats.bytes <= 3 * 4096 + 200, "bytes {}", stats.bytes);
    // ...and it is still there after a crash, with its failed attempt
    // (its record's latest place was copied forward, not its admission's).
    let crashed = snapshot(&dir, "reclaim-copy");
    let found = Journal::open(&crashed).unwrap().take_recovered();
    assert_eq!(found.len(), 1);
    assert_eq!((&found[0].job[..], found[0].attempts), (&b"stuck"[..], 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_job_ends_in_the_journal_after_the_sinks_flush() {
    let dir = fresh_dir("dead");
    let (sink, mut dead) = ChannelSink::new(10).unwrap();
    let (throttle, drain) = Throttle::builder()
        .drain_rate(10.0)
        .dead_letter(sink)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Failed })
        .unwrap();
    throttle.submit("doomed".to_string()).await.unwrap();
    assert_eq!(dead.recv().await.map(|d| d.job), Some("doomed".to_string()));
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(report.stats.outcome(Outcome::DeadLettered), 1);
    drop(throttle);
    drain.join().await;
    assert_eq!(Journal::open(&dir).unwrap().recovered(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_keeps_what_is_unfinished_for_the_next_start() {
    let dir = fresh_dir("keep");
    let (throttle, drain) = Throttle::builder()
        .drain_rate(1000.0)
        .capacity(20)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    for i in 0..20 {
        throttle.try_submit(format!("job-{i}")).unwrap();
    }
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(report.stats.outcome(Outcome::Kept), 20);
    assert!(
        report.returned.is_empty(),
        "kept in the journal, not handed back"
    );
    drop(throttle);
    drain.join().await;
    let (seen, deliver) = recorder();
    let (again, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .journal(Journal::open(&dir).unwrap())
        .build(deliver)
        .unwrap();
    seen.reach(20).await;
    let report = again.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.delivered(), 20);
    assert_eq!(report.stats.outcome(Outcome::Kept), 0);
}

/// A delivery that hangs past the shutdown's grace is stopped there, and
/// its job kept in the journal (under its id) for the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_hanging_at_shutdown_is_kept_for_the_next_start() {
    let dir = fresh_dir("hanging");
    let (throttle, drain) = Throttle::builder()
        .drain_rate(1000.0)
        .deliver_timeout(Duration::from_secs(60))
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| std::future::pending::<Delivery>())
        .unwrap();
    let id = throttle.submit("hangs".to_string()).await.unwrap().id();
    while throttle.stats().in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let began = std::time::Instant::now();
    let report = throttle.shutdown(Duration::from_millis(200)).await;
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(report.stats.outcome(Outcome::Kept), 1);
    assert_eq!(report.stats.in_flight(), 0);
    drop(throttle);
    drain.join().await;
    let journal = Journal::open(&dir).unwrap();
    let found = journal.take_recovered();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].id, &found[0].job[..]), (id, &b"hangs"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_throttle_refuses_before_recording() {
    let dir = fresh_dir("closed");
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.shutdown(Duration::ZERO).await;
    let refused = throttle.submit("late".to_string()).await.unwrap_err();
    assert_eq!(refused.reason(), Reason::Closed);
    throttle.journal().unwrap().flush().await;
    assert_eq!(throttle.journal().unwrap().stats().live, 0);
}

/// One destination's downstream, recording into [`Seen`].
type Recording = Box<dyn Fn(&String, Attempt) -> std::future::Ready<Delivery> + Send + Sync>;

/// A set's deliveries as `(id, "destination:job")`.
fn set_recorder() -> (
    Arc<Seen>,
    impl Fn(&str) -> Recording + Send + Sync + 'static,
) {
    let seen = Arc::new(Seen::default());
    let log = seen.clone();
    let factory = move |name: &str| {
        let (log, name) = (log.clone(), name.to_owned());
        Box::new(move |job: &String, attempt: Attempt| {
            log.jobs
                .lock()
                .unwrap()
                .push((attempt.id(), format!("{name}:{job}")));
            log.more.notify_waiters();
            std::future::ready(Delivery::Done)
        }) as Recording
    };
    (seen, factory)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sets_journal_gives_each_job_back_to_its_destination_with_its_id() {
    use dripfeed::destinations::{DestinationConfig, Destinations};
    let dir = fresh_dir("set-crash");
    // The receivers hang: every job is queued or in flight when the copy is taken.
    let set = Destinations::builder(Throttle::builder().drain_rate(1000.0).max_in_flight(1))
        .destination("a", DestinationConfig::default())
        .destination("b", DestinationConfig::default())
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &str| |_: &String, _| std::future::pending::<Delivery>())
        .unwrap();
    let mut admitted = Vec::new();
    for (dest, n) in [("a", 5), ("b", 3), ("c", 2)] {
        for i in 0..n {
            let id = set.try_submit(dest, format!("job-{i}")).unwrap().id();
            admitted.push((id, format!("{dest}:job-{i}")));
        }
    }
    set.journal().unwrap().flush().await;
    let crashed = snapshot(&dir, "set-crash-copy");

    let journal = Journal::open(&crashed).unwrap();
    assert_eq!(journal.recovered(), 10);
    let (seen, factory) = set_recorder();
    let again = Destinations::builder(Throttle::builder().drain_rate(1000.0))
        .destination("a", DestinationConfig::default())
        .destination("b", DestinationConfig::default())
        .journal(journal)
        .build(factory)
        .unwrap();
    assert!(
        again.contains("c"),
        "a destination no longer named is made for its jobs"
    );
    again.try_submit("b", "new".to_string()).unwrap();
    seen.reach(11).await;
    let mut seen = seen.jobs();
    let new = seen.iter().position(|(_, j)| j == "b:new").unwrap();
    seen.remove(new);
    seen.sort();
    assert_eq!(
        seen, admitted,
        "each job went to its own destination, with its id"
    );
    let journal = again.journal().unwrap().clone();
    let (stats, returned) = again.shutdown(Duration::from_secs(5)).await;
    assert!(returned.is_empty());
    let delivered: Vec<_> = stats.iter().map(|s| (s.name(), s.delivered())).collect();
    assert_eq!(delivered, vec![("a", 5), ("b", 4), ("c", 2)]);
    assert_eq!(
        journal.stats().live,
        0,
        "every delivery ended in the journal"
    );
}

/// A single throttle on `dir` admits `job` and shuts down with it still
/// queued: it stays in the journal (no destination named). Returns its id.
async fn left_by_a_single_throttle(dir: &Path, job: &str) -> u64 {
    let (throttle, drain) = Throttle::builder()
        .drain_rate(1000.0)
        .journal(Journal::open(dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let id = throttle.submit(job.to_owned()).await.unwrap().id();
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(report.stats.outcome(Outcome::Kept), 1);
    drop(throttle);
    drain.join().await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_throttles_journal_goes_to_the_only_named_destination() {
    use dripfeed::destinations::{DestinationConfig, Destinations};
    let dir = fresh_dir("single-to-set");
    let id = left_by_a_single_throttle(&dir, "old").await;

    let (seen, factory) = set_recorder();
    let set = Destinations::builder(Throttle::builder().drain_rate(1000.0))
        .destination("only", DestinationConfig::default())
        .journal(Journal::open(&dir).unwrap())
        .build(factory)
        .unwrap();
    seen.reach(1).await;
    assert_eq!(seen.jobs(), vec![(id, "only:old".to_string())]);
    set.shutdown(Duration::from_secs(5)).await;
    drop(set);

    // With two named destinations an untagged record has no home: it stays.
    left_by_a_single_throttle(&dir, "orphan").await;
    let set = Destinations::builder(Throttle::builder().drain_rate(1000.0))
        .destination("x", DestinationConfig::default())
        .destination("y", DestinationConfig::default())
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &str| |_: &String, _| async { Delivery::Done })
        .unwrap();
    let journal = set.journal().unwrap().clone();
    set.shutdown(Duration::from_secs(1)).await;
    assert_eq!(set.held(), 0);
    assert_eq!(journal.stats().live, 1, "left in the journal, not lost");
}

/// A destination removed for good hands what it still holds to the
/// dead-letter sink, even with the set's journal, and the journal forgets
/// those jobs once the sink has them: nothing comes back at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_destination_dead_letters_what_it_holds_and_the_journal_forgets_it() {
    use dripfeed::destinations::{DestinationConfig, Destinations};
    let dir = fresh_dir("removed-destination");
    let (sink, mut letters) = ChannelSink::new(16).unwrap();
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(1.0)
            .capacity(10)
            .dead_letter(sink),
    )
    .destination("old", DestinationConfig::default())
    .journal(Journal::open(&dir).unwrap())
    .build(|_: &str| |_: &String, _| async { Delivery::Done })
    .unwrap();
    for n in 0..3 {
        set.submit_timeout("old", format!("job {n}"), std::time::Duration::ZERO)
            .await
            .unwrap();
    }
    let (stats, returned) = set.remove("old", Duration::ZERO).await.unwrap();
    assert!(returned.is_empty(), "the sink took them");
    let mut dead = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(5), letters.recv()).await {
        dead += 1;
        if dead + stats.delivered() == 3 {
            break;
        }
    }
    assert_eq!(
        dead + stats.delivered(),
        3,
        "delivered or dead-lettered: {stats:?}"
    );
    let journal = set.journal().unwrap().clone();
    let ended = support::until_true(Duration::from_secs(10), || journal.stats().live == 0).await;
    assert!(
        ended,
        "the dead-lettered jobs' records ended: {:?}",
        journal.stats()
    );
    let (_, _) = set.shutdown(Duration::ZERO).await;
    drop((set, journal));
    let reopened = Journal::open(&dir).unwrap();
    assert_eq!(reopened.recovered(), 0, "nothing left for the next start");
    drop(reopened);
    let _ = std::fs::remove_dir_all(&dir);
}
