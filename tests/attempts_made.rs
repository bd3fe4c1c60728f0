//! A job submitted with the attempts it made before (`Submission::attempts_made`:
//! its caller's own store kept them across a restart) goes on counting:
//! its first attempt here is the next, and the retry policy gives it only
//! the attempts it has left, on every way in (`try_submit`, `submit`,
//! `submit_timeout`, a key, a destination set).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::destinations::Destinations;
use dripfeed::keyed::Quota;
use dripfeed::{
    Attempt, ChannelSink, DeadLetterReason, Delivery, RetryPolicy, Submission, Throttle,
    ThrottleBuilder,
};
use tokio::time::sleep;

/// The attempts' numbers a downstream saw, in order.
type Numbers = Arc<Mutex<Vec<u32>>>;

/// A downstream that asks for every attempt again after 10 ms, logging
/// the attempts' numbers.
fn refusing() -> (
    Numbers,
    impl Fn(&u32, Attempt) -> std::future::Ready<Delivery> + Clone + Send + Sync + 'static,
) {
    let seen = Numbers::default();
    let log = seen.clone();
    let deliver = move |_: &u32, attempt: Attempt| {
        log.lock().unwrap().push(attempt.number());
        std::future::ready(Delivery::Retry {
            after: Some(Duration::from_millis(10)),
        })
    };
    (seen, deliver)
}

fn builder() -> ThrottleBuilder<u32> {
    Throttle::builder()
        .drain_rate(1000.0)
        .retries(RetryPolicy::new(4).backoff(Duration::from_millis(10), Duration::from_secs(1)))
}

#[tokio::test(start_paused = true)]
async fn a_job_goes_on_from_the_attempts_it_made_on_every_way_in() {
    let (sink, mut dead) = ChannelSink::new(16).unwrap();
    let (seen, deliver) = refusing();
    let quota = Quota::per_second(100.0).burst(10.0).unwrap();
    let (throttle, _drain) = builder()
        .per_key(100, quota)
        .dead_letter(sink)
        .build(deliver)
        .unwrap();
    throttle.pause();
    throttle
        .try_submit(Submission::new(1).attempts_made(2))
        .unwrap();
    throttle
        .submit(Submission::new(2).attempts_made(3))
        .await
        .unwrap();
    let keyed = Submission::new(3).key("acme", 1.0).attempts_made(1);
    throttle
        .submit_timeout(keyed, Duration::ZERO)
        .await
        .unwrap();
    throttle.try_submit(4).unwrap();
    throttle.resume();
    sleep(Duration::from_secs(5)).await;

    let mut letters = Vec::new();
    while let Ok(letter) = dead.try_recv() {
        letters.push((letter.job, letter.why));
    }
    letters.sort_by_key(|(job, _)| *job);
    let failed = DeadLetterReason::Failed { attempts: 4 };
    assert_eq!(
        letters,
        [(1, failed), (2, failed), (3, failed), (4, failed)]
    );
    // 2 + 1 + 3 + 4 attempts made here, every job's last numbered 4.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 10, "{seen:?}");
    assert_eq!(seen.iter().filter(|&&n| n == 4).count(), 4, "{seen:?}");
    assert_eq!(
        seen.iter().filter(|&&n| n == 1).count(),
        1,
        "only job 4 started at 1: {seen:?}"
    );
    assert_eq!(throttle.stats().retried(), 6);
}

/// Past the policy's attempts, a job makes one last attempt, numbered as
/// the policy's last, then is dead-lettered with that count.
#[tokio::test(start_paused = true)]
async fn past_the_policy_a_job_makes_one_last_attempt() {
    let (sink, mut dead) = ChannelSink::new(4).unwrap();
    let (seen, deliver) = refusing();
    let (throttle, _drain) = builder().dead_letter(sink).build(deliver).unwrap();
    throttle
        .try_submit(Submission::new(7).attempts_made(u32::MAX))
        .unwrap();
    let letter = dead.recv().await.unwrap();
    assert_eq!(letter.why, DeadLetterReason::Failed { attempts: 4 });
    assert_eq!(*seen.lock().unwrap(), [4]);
    assert_eq!(throttle.stats().retried(), 0);
}

/// A job that succeeds on its next attempt is delivered as any job is.
#[tokio::test(start_paused = true)]
async fn a_job_delivered_on_its_next_attempt_is_delivered() {
    let seen = Numbers::default();
    let log = seen.clone();
    let (throttle, _drain) = builder()
        .build(move |_: &u32, attempt: Attempt| {
            log.lock().unwrap().push(attempt.number());
            async { Delivery::Done }
        })
        .unwrap();
    throttle
        .try_submit(Submission::new(7).attempts_made(1))
        .unwrap();
    sleep(Duration::from_millis(100)).await;
    assert_eq!(*seen.lock().unwrap(), [2]);
    assert_eq!(throttle.stats().delivered(), 1);
}

/// A destination set hands the count to the destination's throttle.
#[tokio::test(start_paused = true)]
async fn a_destination_set_keeps_the_count() {
    let (seen, deliver) = refusing();
    let set = Destinations::builder(builder())
        .build(move |_: &str| deliver.clone())
        .unwrap();
    set.try_submit("a", Submission::new(1).attempts_made(2))
        .unwrap();
    set.submit_timeout("b", Submission::new(2).attempts_made(3), Duration::ZERO)
        .await
        .unwrap();
    sleep(Duration::from_secs(5)).await;
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, [3, 4, 4]);
}
