//! A job's failed attempts survive a restart: the journal records each
//! retry's count, so a relay killed between retries does not give its
//! failing jobs a fresh set of attempts at every start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::journal::{Durability, Journal};
use dripfeed::{
    Attempt, ChannelSink, DeadLetter, DeadLetterReason, Delivery, RetryPolicy, Submission, Throttle,
};

use super::{Scratch, fresh_dir, settled, snapshot};
use crate::support;

/// The attempts' numbers a downstream saw.
type Numbers = Arc<Mutex<Vec<u32>>>;

/// A downstream that fails every attempt, asking for the next one soon
/// (after attempt `slow_after`: in an hour), and logs the attempts' numbers.
fn failing(
    slow_after: u32,
) -> (
    Numbers,
    impl Fn(&String, Attempt) -> std::future::Ready<Delivery> + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let deliver = move |_: &String, attempt: Attempt| {
        log.lock().unwrap().push(attempt.number());
        let after = if attempt.number() >= slow_after {
            Duration::from_secs(3600)
        } else {
            Duration::from_millis(1)
        };
        std::future::ready(Delivery::Retry { after: Some(after) })
    };
    (seen, deliver)
}

fn policy() -> RetryPolicy {
    RetryPolicy::new(4).backoff(Duration::from_millis(1), Duration::from_secs(3600))
}

/// A restart's policy whose longest wait is 10 ms: a recovered job's
/// retry an hour away is due within it.
fn soon(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new(max_attempts).backoff(Duration::from_millis(1), Duration::from_millis(10))
}

/// A job ("flaky") journaled in `name`'s directory whose first `failures`
/// attempts failed (the next one an hour away), as a crash then would
/// leave it: the copy of the directory and the job's id.
async fn failed_then_crashed(name: &str, failures: u32) -> (Scratch, u64) {
    let dir = fresh_dir(name);
    let (seen, deliver) = failing(failures);
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(policy())
        .journal(Journal::open(&dir).unwrap())
        .build(deliver)
        .unwrap();
    let id = throttle.submit("flaky".to_string()).await.unwrap().id();
    let scheduled = || throttle.stats().retried() == u64::from(failures);
    assert!(support::until_true(Duration::from_secs(30), scheduled).await);
    assert_eq!(*seen.lock().unwrap(), (1..=failures).collect::<Vec<_>>());
    throttle.journal().unwrap().flush().await;
    (snapshot(&dir, &format!("{name}-copy")), id)
}

/// `submission` journaled in `name`'s directory and never attempted (the
/// throttle paused), as a crash then would leave it: the copy of the
/// directory and the job's id.
async fn queued_then_crashed(name: &str, submission: Submission<'_, String>) -> (Scratch, u64) {
    let dir = fresh_dir(name);
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(policy())
        .journal(Journal::open(&dir).unwrap())
        .build(|_: &String, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let id = throttle
        .submit_timeout(submission, Duration::ZERO)
        .await
        .unwrap()
        .id();
    throttle.journal().unwrap().flush().await;
    (snapshot(&dir, &format!("{name}-copy")), id)
}

/// The job `crashed` holds, started again under `retries` with a
/// downstream that fails every attempt: its dead letter, the attempts'
/// numbers made, and the throttle.
async fn dead_letter_after_restart(
    crashed: &Scratch,
    retries: RetryPolicy,
) -> (DeadLetter<String>, Vec<u32>, Throttle<String>) {
    let (sink, mut dead) = ChannelSink::new(4).unwrap();
    let (seen, deliver) = failing(u32::MAX);
    let (again, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(retries)
        .dead_letter(sink)
        .journal(Journal::open(crashed).unwrap())
        .build(deliver)
        .unwrap();
    let letter = tokio::time::timeout(Duration::from_secs(30), dead.recv())
        .await
        .expect("dead-lettered within 30 s")
        .expect("a letter");
    let seen = seen.lock().unwrap().clone();
    (letter, seen, again)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_goes_on_from_the_attempts_a_job_made() {
    // Two attempts failed and the third is scheduled an hour away.
    let (crashed, id) = failed_then_crashed("attempts", 2).await;
    let found = Journal::open(snapshot(&crashed, "attempts-look").as_ref())
        .unwrap()
        .take_recovered();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].id, found[0].attempts), (id, 2));
    // Its third attempt was due an hour after its second.
    let due = found[0].retry_at.expect("a retry was scheduled");
    let ahead = due.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(ahead > Duration::from_secs(3500), "{ahead:?}");
    assert!(ahead <= Duration::from_secs(3600), "{ahead:?}");

    // The next start makes attempts 3 and 4 only, then gives up (its
    // policy's longest wait 10 ms: the hour is cut to it).
    let (letter, seen, again) = dead_letter_after_restart(&crashed, soon(4)).await;
    assert_eq!(
        (letter.job.as_str(), letter.why),
        ("flaky", DeadLetterReason::Failed { attempts: 4 })
    );
    assert_eq!(seen, [3, 4], "attempts 1 and 2 were made before");
    let report = again.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.retried(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_failed_starts_at_its_first_attempt() {
    let queued = Submission::new("queued".to_string());
    let (crashed, _) = queued_then_crashed("attempts-none", queued).await;
    let (seen, deliver) = failing(1);
    let (_again, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(policy())
        .journal(Journal::open(&crashed).unwrap())
        .build(deliver)
        .unwrap();
    assert!(
        support::until_true(Duration::from_secs(30), || !seen.lock().unwrap().is_empty()).await
    );
    assert_eq!(seen.lock().unwrap()[0], 1);
}

/// A run whose policy allows fewer attempts than a recovered job made
/// gives it one last attempt, numbered as the policy's last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_policy_after_a_restart_makes_one_last_attempt() {
    let (crashed, _) = failed_then_crashed("attempts-fewer", 3).await;
    let (letter, seen, _again) = dead_letter_after_restart(&crashed, soon(2)).await;
    assert_eq!(letter.why, DeadLetterReason::Failed { attempts: 2 });
    assert_eq!(seen, [2]);
}

/// A job submitted unjournaled stays out of the journal when it is
/// retried (its count has no record to take the place of), and a retry's
/// record is fsynced as admissions are (`Durability::Sync`): the segment
/// that held the job's admission may be removed once its place moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_record_only_journaled_jobs_and_as_durably_as_admissions() {
    let dir = fresh_dir("attempts-unjournaled");
    let (seen, deliver) = failing(1);
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(policy())
        .journal(
            Journal::options()
                .durability(Durability::Sync)
                .open(&dir)
                .unwrap(),
        )
        .build(deliver)
        .unwrap();
    let journal = throttle.journal().unwrap().clone();
    throttle
        .submit_timeout(
            Submission::new("kept elsewhere".to_string()).unjournaled(),
            Duration::ZERO,
        )
        .await
        .unwrap();
    assert!(support::until_true(Duration::from_secs(30), || throttle.stats().retried() == 1).await);
    let stats = settled(&journal).await;
    assert_eq!(stats.live, 0, "an unjournaled job's retry wrote no record");
    let crashed = snapshot(&dir, "attempts-unjournaled-copy");
    assert_eq!(Journal::open(&crashed).unwrap().recovered(), 0);

    throttle.pause();
    throttle.submit("journaled".to_string()).await.unwrap();
    let before = journal.stats().fsyncs; // the admission's
    throttle.resume();
    assert!(support::until_true(Duration::from_secs(30), || throttle.stats().retried() == 2).await);
    // The retry's record, on its own in a batch, is fsynced.
    let synced = || journal.stats().fsyncs > before;
    assert!(support::until_true(Duration::from_secs(30), synced).await);
    assert_eq!(seen.lock().unwrap().len(), 2);
    let crashed = snapshot(&dir, "attempts-journaled-copy");
    let found = Journal::open(&crashed).unwrap().take_recovered();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (&found[0].job[..], found[0].attempts),
        (&b"journaled"[..], 1)
    );
}

/// A job submitted with the attempts it made elsewhere
/// (`Submission::attempts_made`) has them recorded with it: a crash before
/// its next attempt gives none of them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_made_before_a_submission_are_journaled_with_it() {
    let made = Submission::new("made two".to_string()).attempts_made(2);
    let (crashed, id) = queued_then_crashed("attempts-made", made).await;
    let found = Journal::open(snapshot(&crashed, "attempts-made-look").as_ref())
        .unwrap()
        .take_recovered();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].id, found[0].attempts), (id, 2));

    let (letter, seen, _again) = dead_letter_after_restart(&crashed, policy()).await;
    assert_eq!(letter.why, DeadLetterReason::Failed { attempts: 4 });
    assert_eq!(
        seen,
        [3, 4],
        "attempts 1 and 2 were made before it was submitted"
    );
}

/// Hears the retries a throttle schedules: the attempt's number and the
/// wait.
#[derive(Default)]
struct Scheduled(Mutex<Vec<(u32, Duration)>>);

impl dripfeed::DrainHook for Scheduled {
    fn retry_scheduled(&self, next: Attempt, after: Duration) {
        self.0.lock().unwrap().push((next.number(), after));
    }
}

/// A job waiting for a retry at a crash waits for it after the restart
/// too (a receiver's `Retry-After` holds), where it was sent at once; the
/// hook hears of it as a retry scheduled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_a_retry_waiting_until_it_is_due() {
    let (crashed, _) = failed_then_crashed("attempts-due", 1).await;
    let (seen, deliver) = failing(u32::MAX);
    let heard = Arc::new(Scheduled::default());
    let (again, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .retries(policy())
        .drain_hook(heard.clone())
        .journal(Journal::open(&crashed).unwrap())
        .build(deliver)
        .unwrap();
    let waiting = || again.stats().retry_wait() == 1;
    assert!(support::until_true(Duration::from_secs(30), waiting).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(seen.lock().unwrap().is_empty(), "its retry is an hour away");
    assert_eq!(again.stats().retry_wait(), 1);
    let heard = heard.0.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].0, 2, "its second attempt");
    assert!(heard[0].1 > Duration::from_secs(3500), "{heard:?}");
}
