//! The shared queue on Redis Streams (`RedisQueue`) against a real server:
//! admission bounded fleet-wide with idempotency, claims that never hand
//! one entry to two consumers, acknowledgements and retries in one round
//! trip each, a retry made once only, a dead consumer's entries reclaimed,
//! and a Redis restart without persistence recovered from without help.
//! Loopback, real time, bounded; no sleeps.

use std::collections::HashSet;
use std::time::Duration;

use dripfeed::global::RedisConnection;

use super::map::RedisMap;
use super::queue::{Admission, RedisQueue};
use super::queue_status::{Ending, JobState};
use support_redis::{RedisServer, available};

// The library's test support: a throwaway redis-server on a free port.
#[path = "../../../../../tests/support/redis.rs"]
mod support_redis;

const DAY: Duration = Duration::from_secs(86_400);

/// An id unique in the test run.
fn fresh() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn added(a: Admission) -> String {
    match a {
        Admission::Added { id, .. } => id,
        other => panic!("not added: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_is_bounded_fleet_wide_and_a_repeat_answers_the_first_id() {
    if !available("admission_is_bounded_fleet_wide_and_a_repeat_answers_the_first_id") {
        return;
    }
    let redis = RedisServer::start();
    // Two nodes, one queue.
    let a = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "billing", "a");
    let b = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "billing", "b");
    let first = added(
        a.admit(&fresh(), b"one", Some("acme:k1"), 3, DAY)
            .await
            .unwrap(),
    );
    assert_eq!(
        b.admit(&fresh(), b"one again", Some("acme:k1"), 3, DAY)
            .await
            .unwrap(),
        Admission::Repeat { id: first.clone() },
        "the key is the fleet's, not the node's"
    );
    assert!(matches!(
        b.admit(&fresh(), b"other tenant", Some("globex:k1"), 3, DAY)
            .await
            .unwrap(),
        Admission::Added { depth: 2, .. }
    ));
    added(a.admit(&fresh(), b"three", None, 3, DAY).await.unwrap());
    assert_eq!(
        b.admit(&fresh(), b"four", None, 3, DAY).await.unwrap(),
        Admission::Full { depth: 3 }
    );
    assert_eq!(a.depth().await.unwrap(), 3);
    let empty = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "empty", "a");
    assert_eq!(
        RedisQueue::depths(&[&a, &empty, &b]).await.unwrap(),
        vec![3, 0, 3],
        "the depths of many queues, read together"
    );
    // A repeat is answered even when full; nothing was written for it.
    assert!(matches!(
        a.admit(&fresh(), b"x", Some("acme:k1"), 3, DAY)
            .await
            .unwrap(),
        Admission::Repeat { .. }
    ));
    // Acknowledged entries leave the bound.
    let claimed = a.claim(10).await.unwrap();
    assert_eq!(claimed.len(), 3);
    assert_eq!(claimed[0].id, first);
    assert_eq!(claimed[0].job, b"one");
    let ids: Vec<String> = claimed.iter().map(|c| c.stream_id.clone()).collect();
    assert_eq!(a.ack(&ids).await.unwrap(), 3);
    assert_eq!(a.depth().await.unwrap(), 0);
    added(
        b.admit(&fresh(), b"room again", None, 3, DAY)
            .await
            .unwrap(),
    );
    // Each admission one round trip; a claim one; a batch of acks one.
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let c = RedisQueue::new(conn.clone(), "billing", "c");
    c.depth().await.unwrap(); // connects
    let before = conn.round_trips();
    for n in 0..10 {
        c.admit(&fresh(), format!("job {n}").as_bytes(), None, 1000, DAY)
            .await
            .unwrap();
    }
    let got = c.claim(16).await.unwrap();
    let ids: Vec<String> = got.iter().map(|g| g.stream_id.clone()).collect();
    c.ack(&ids).await.unwrap();
    assert_eq!(got.len(), 11);
    assert_eq!(
        conn.round_trips() - before,
        12,
        "10 admissions, 1 claim, 1 ack of 11"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_split_retries_happen_once_and_a_dead_consumers_work_is_reclaimed() {
    if !available("claims_split_retries_happen_once_and_a_dead_consumers_work_is_reclaimed") {
        return;
    }
    let redis = RedisServer::start();
    let node =
        |name: &str| RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "crm", name);
    let (a, b) = (node("a"), node("b"));
    for n in 0..6 {
        a.admit(&fresh(), format!("{n}").as_bytes(), None, 100, DAY)
            .await
            .unwrap();
    }
    let by_a = a.claim(2).await.unwrap();
    let by_b = b.claim(10).await.unwrap();
    assert_eq!((by_a.len(), by_b.len()), (2, 4));
    let all: HashSet<&str> = by_a.iter().chain(&by_b).map(|c| c.id.as_str()).collect();
    assert_eq!(all.len(), 6, "no entry handed to both");

    // A retry: out of the stream into the retries, due at once here; moved
    // back by whichever node sees it first, once, with its id and one more
    // attempt counted.
    let failed = by_b[0].clone();
    assert!(b.retry(&failed, Duration::ZERO).await.unwrap());
    assert!(
        !b.retry(&failed, Duration::ZERO).await.unwrap(),
        "retried once"
    );
    assert_eq!(b.depth().await.unwrap(), 6, "still outstanding");
    let (moved_a, moved_b) = tokio::join!(a.promote_due(10, DAY), b.promote_due(10, DAY));
    assert_eq!(moved_a.unwrap() + moved_b.unwrap(), 1, "moved back once");
    let again = a.claim(10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].id.as_str(), again[0].attempts),
        (failed.id.as_str(), 1)
    );
    assert_ne!(again[0].stream_id, failed.stream_id);
    assert_eq!(again[0].job, failed.job);
    // A retry not yet due stays put.
    assert!(a.retry(&again[0], Duration::from_secs(3600)).await.unwrap());
    assert_eq!(a.promote_due(10, DAY).await.unwrap(), 0);
    // retry_max lowered to nothing: due at once, moved back now.
    assert_eq!(a.promote_due(10, Duration::ZERO).await.unwrap(), 1);
    let back = a.claim(10).await.unwrap();
    assert_eq!((back.len(), back[0].attempts), (1, 2));
    assert!(a.retry(&back[0], Duration::from_secs(3600)).await.unwrap());

    // b dies holding three entries; a takes them over once they have been
    // pending long enough (here: at once), and only those.
    let fresh = a.reclaim(Duration::from_secs(3600), 10).await.unwrap();
    assert!(fresh.is_empty(), "nothing has been pending an hour");
    assert_eq!(b.deliveries(&by_b[1]).await.unwrap(), 1, "claimed once");
    let taken = a.reclaim(Duration::ZERO, 10).await.unwrap();
    let taken_ids: HashSet<&str> = taken.iter().map(|c| c.id.as_str()).collect();
    let of_b: HashSet<&str> = by_b[1..].iter().map(|c| c.id.as_str()).collect();
    assert!(of_b.is_subset(&taken_ids), "{taken_ids:?} ⊇ {of_b:?}");
    let again = taken.iter().find(|c| c.id == by_b[1].id).expect("taken");
    assert_eq!(
        a.deliveries(again).await.unwrap(),
        2,
        "claimed, then taken over"
    );
    // b comes back: it no longer holds what a took over (so it does not
    // send it), while a holds it afresh.
    assert!(!b.hold(&by_b[1]).await.unwrap(), "taken over: not b's");
    assert!(a.hold(&taken[0]).await.unwrap(), "a's");
    let after_hold = a.reclaim(Duration::from_secs(60), 10).await.unwrap();
    assert!(after_hold.is_empty(), "held afresh: not idle");
    // A consumer that stops hands back what it will not deliver: another
    // takes it at once, not after the take-over time.
    added(a.admit("late-1", b"late", None, 100, DAY).await.unwrap());
    let late = a.claim(1).await.unwrap();
    assert_eq!(late.len(), 1);
    assert!(
        b.reclaim(Duration::from_secs(3600), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(a.release(&late).await.unwrap(), 1);
    assert_eq!(b.release(&late).await.unwrap(), 0, "not b's to release");
    let handed = b.reclaim(Duration::from_secs(3600), 10).await.unwrap();
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].id, late[0].id);
    // b acknowledges late: the entries a ended are not ended twice, and a
    // retry of one a took over is refused.
    let ids: Vec<String> = taken.iter().map(|c| c.stream_id.clone()).collect();
    assert_eq!(a.ack(&ids).await.unwrap(), ids.len() as u64);
    assert!(!b.retry(&by_b[1], Duration::ZERO).await.unwrap());
    assert_eq!(b.ack(&[by_b[2].stream_id.clone()]).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_without_persistence_needs_no_operator() {
    if !available("a_redis_restart_without_persistence_needs_no_operator") {
        return;
    }
    let mut redis = RedisServer::start_forgetful();
    let q = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "ship", "a");
    q.admit(&fresh(), b"before", None, 10, DAY).await.unwrap();
    assert_eq!(q.claim(10).await.unwrap().len(), 1);
    redis.restart(); // no persistence: the stream and its group are gone
    // Unreachable while it restarts, then each call works again: a claim
    // finds no group (NOGROUP), makes it, and reads what is new.
    let mut after = None;
    for _ in 0..50 {
        match q.admit(&fresh(), b"after", None, 10, DAY).await {
            Ok(a) => {
                after = Some(a);
                break;
            }
            Err(_) => tokio::task::yield_now().await,
        }
    }
    assert!(
        matches!(after, Some(Admission::Added { depth: 1, .. })),
        "{after:?}"
    );
    let got = q.claim(10).await.unwrap();
    assert_eq!(got.len(), 1, "the group was made again");
    assert_eq!(got[0].job, b"after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_dead_lettered_unsent_keeps_its_attempts() {
    if !available("a_job_dead_lettered_unsent_keeps_its_attempts") {
        return;
    }
    let redis = RedisServer::start();
    let q = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "gone", "a")
        .with_status(DAY, 100)
        .with_dead_letters(100);
    let mut ids = Vec::new();
    for (id, body) in [("201", &b"never sent"[..]), ("202", &b"sent once"[..])] {
        ids.push(added(
            q.admit_owned(id, body, None, 10, DAY, None).await.unwrap(),
        ));
    }
    // 202 answered 503 once, and is due again at once.
    let _never = q.claim(1).await.unwrap().pop().expect("claimed");
    let once = q.claim(1).await.unwrap().pop().expect("claimed");
    assert!(
        q.retry_failed(&once, Duration::ZERO, Some(503), "status: 503")
            .await
            .unwrap()
    );
    // Its destination deleted: both dead-lettered where they wait, unsent
    // (a deletion counted one attempt more than each had: 1 and 2).
    let held = q.reclaim(Duration::ZERO, 10).await.unwrap();
    q.promote_due(10, DAY).await.unwrap();
    let mut ends: Vec<Ending> = held
        .into_iter()
        .map(|c| Ending::unsent(c.stream_id, "destination-deleted"))
        .collect();
    ends.extend(
        q.claim(10)
            .await
            .unwrap()
            .into_iter()
            .map(|c| Ending::unsent(c.stream_id, "destination-deleted")),
    );
    assert_eq!(q.end(&ends).await.unwrap(), 2);
    let mut letters: Vec<(String, u32)> = q
        .dead_letters(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.id, d.attempts))
        .collect();
    letters.sort();
    assert_eq!(letters, vec![(ids[0].clone(), 0), (ids[1].clone(), 1)]);
    for (id, attempts) in [(&ids[0], 0), (&ids[1], 1)] {
        let status = q.status(id).await.unwrap().expect("kept");
        assert_eq!(
            (status.state, status.attempts),
            (JobState::DeadLettered, attempts)
        );
    }
    // A copy fanned out as its endpoint was deleted never entered the
    // queue: its letter is written all the same, listed with the others.
    // Once, however many times its event is fanned out; and never for an
    // id that entered the queue (201 was dead-lettered there already).
    let mut written = 0;
    for _ in 0..3 {
        written += u32::from(
            q.dead_letter_unsent("203", b"late", "application-deleted", Some("acme"))
                .await
                .unwrap(),
        );
        let queued = q
            .dead_letter_unsent(&ids[0], b"never sent", "application-deleted", None)
            .await
            .unwrap();
        assert!(!queued);
    }
    assert_eq!(written, 1);
    let all = q.dead_letters(None, 10).await.unwrap();
    assert_eq!(all.len(), 3, "one letter each");
    let last = all.last().expect("listed");
    assert_eq!(
        (
            last.id.as_str(),
            last.reason.as_str(),
            last.attempts,
            &last.job[..]
        ),
        ("203", "application-deleted", 0, &b"late"[..])
    );
    let status = q.status("203").await.unwrap().expect("kept");
    assert_eq!(
        (status.state, status.attempts, status.owner.as_deref()),
        (JobState::DeadLettered, 0, Some("acme"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_status_is_readable_from_any_node_and_ended_ones_are_bounded() {
    if !available("a_jobs_status_is_readable_from_any_node_and_ended_ones_are_bounded") {
        return;
    }
    let redis = RedisServer::start();
    let node = |name: &str| {
        RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "ship", name)
            .with_status(DAY, 1)
            .with_dead_letters(100)
    };
    let (a, b) = (node("a"), node("b"));
    let first = added(
        a.admit_owned("101", b"one", None, 10, DAY, Some("acme"))
            .await
            .unwrap(),
    );
    // An id already known is refused: the caller draws another.
    assert_eq!(
        b.admit_owned("101", b"again", None, 10, DAY, None)
            .await
            .unwrap(),
        Admission::Taken
    );
    let seen = b.status(&first).await.unwrap().expect("known to b");
    assert_eq!(seen.state, JobState::Queued);
    assert_eq!((seen.attempts, seen.owner.as_deref()), (0, Some("acme")));
    assert!(seen.received_unix_ms > 0 && seen.ended_unix_ms.is_none());
    // Claimed by a: in flight, as b sees it.
    let held = a.claim(1).await.unwrap().pop().expect("claimed");
    assert_eq!(
        b.status(&first).await.unwrap().unwrap().state,
        JobState::InFlight
    );
    // Answered 503: waiting for a retry, with its due time.
    assert!(
        a.retry_failed(&held, DAY, Some(503), "status: 503")
            .await
            .unwrap()
    );
    let waiting = b.status(&first).await.unwrap().unwrap();
    assert_eq!(
        (waiting.state, waiting.attempts, waiting.last_status),
        (JobState::RetryWaiting, 1, Some(503))
    );
    assert_eq!(waiting.last_error.as_deref(), Some("status: 503"));
    assert!(waiting.next_attempt_unix_ms.unwrap() > waiting.received_unix_ms);
    // retry_max lowered to a minute (on b): the day's wait becomes at most
    // a minute from now, and its status says when; none is due yet.
    assert_eq!(b.promote_due(10, Duration::from_secs(60)).await.unwrap(), 0);
    let sooner = a.status(&first).await.unwrap().unwrap();
    let (was, now) = (
        waiting.next_attempt_unix_ms.unwrap(),
        sooner.next_attempt_unix_ms.unwrap(),
    );
    assert!(
        now < was - 86_000_000 && now <= waiting.received_unix_ms + 3_600_000,
        "moved from {was} to {now}"
    );
    assert_eq!((sooner.state, sooner.attempts), (JobState::RetryWaiting, 1));
    // A longest of the day leaves the minute alone.
    assert_eq!(b.promote_due(10, DAY).await.unwrap(), 0);
    assert_eq!(
        a.status(&first)
            .await
            .unwrap()
            .unwrap()
            .next_attempt_unix_ms,
        Some(now)
    );
    // A second job, delivered (204) by b: ended, with its time.
    let second = added(
        a.admit_owned("102", b"two", None, 10, DAY, None)
            .await
            .unwrap(),
    );
    let got = b.claim(1).await.unwrap().pop().expect("claimed");
    assert_eq!(got.id, second);
    b.end(&[Ending::delivered(got.stream_id, Some(204))])
        .await
        .unwrap();
    let done = a.status(&second).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.attempts, done.last_status, done.owner),
        (JobState::Delivered, 1, Some(204), None)
    );
    assert!(done.ended_unix_ms.is_some());
    // A third, dead-lettered: with at most one ended status kept, the
    // second is forgotten; the first (still held) is not.
    added(a.admit("103", b"three", None, 10, DAY).await.unwrap());
    let third = a.claim(1).await.unwrap().pop().expect("claimed");
    let ending = Ending::dead_lettered(third.stream_id, Some(410), "failed");
    a.end(&[ending.with_error("status: 410")]).await.unwrap();
    let third_status = a.status("103").await.unwrap().unwrap();
    assert_eq!(third_status.state, JobState::DeadLettered);
    assert_eq!(third_status.last_error.as_deref(), Some("status: 410"));
    assert!(a.status(&second).await.unwrap().is_none(), "forgotten");
    assert!(
        a.status(&first).await.unwrap().is_some(),
        "waiting for a retry: not ended, kept"
    );
    assert!(a.status("999").await.unwrap().is_none(), "unknown");
    // The dead letter, written with the end, is read from any node...
    let dead = b.dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].id.as_str(),
            dead[0].reason.as_str(),
            dead[0].attempts
        ),
        ("103", "failed", 1)
    );
    assert_eq!(
        (dead[0].last_status, &dead[0].job[..]),
        (Some(410), &b"three"[..])
    );
    assert_eq!(dead[0].error.as_deref(), Some("status: 410"));
    assert!(
        b.dead_letters(Some(&dead[0].entry), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // ...and put back with its id by any node: its status starts over, and
    // it is no longer counted as ended.
    assert_eq!(
        b.redrive(&[dead[0].entry.clone()], 10).await.unwrap(),
        (1, 0)
    );
    // Once: the letter is gone, neither moved nor refused for want of room.
    assert_eq!(
        b.redrive(&[dead[0].entry.clone()], 10).await.unwrap(),
        (0, 0),
        "once"
    );
    assert!(b.dead_letters(None, 10).await.unwrap().is_empty());
    let again = b.status("103").await.unwrap().unwrap();
    assert_eq!((again.state, again.attempts), (JobState::Queued, 0));
    assert_eq!(again.last_error, None, "its status starts over");
    // Claimed again, as it was.
    let third_again = a.claim(10).await.unwrap();
    assert!(
        third_again
            .iter()
            .any(|c| c.id == "103" && c.job == b"three")
    );
    let fourth = added(a.admit("104", b"four", None, 10, DAY).await.unwrap());
    let mut claimed = a.claim(10).await.unwrap();
    claimed.retain(|c| c.id == fourth);
    let fourth_entry = claimed.pop().expect("claimed");
    a.end(&[Ending::delivered(fourth_entry.stream_id, Some(200))])
        .await
        .unwrap();
    assert!(
        a.status("103").await.unwrap().is_some(),
        "trimming the ended ones spared the re-admitted job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_being_emptied_takes_its_retries_back_early_and_a_shared_map_has_a_version() {
    if !available("a_queue_being_emptied_takes_its_retries_back_early") {
        return;
    }
    let redis = RedisServer::start();
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let q = RedisQueue::new(conn.clone(), "gone", "a");
    for n in 0..3 {
        added(q.admit(&fresh(), &[n], None, 10, DAY).await.unwrap());
    }
    for job in q.claim(3).await.unwrap() {
        assert!(q.retry(&job, Duration::from_secs(3600)).await.unwrap());
    }
    assert_eq!(
        q.promote_due(10, DAY).await.unwrap(),
        0,
        "none due for an hour"
    );
    assert_eq!(q.promote_all(2).await.unwrap(), 2, "at most the asked");
    assert_eq!(q.promote_all(10).await.unwrap(), 1);
    assert_eq!(
        q.claim(10).await.unwrap().len(),
        3,
        "all back in the stream"
    );
    assert_eq!(q.depth().await.unwrap(), 3);

    // Two nodes share one map: each change bumps the version both read.
    let a = RedisMap::new(conn, "settings");
    let b = RedisMap::new(RedisConnection::open(&redis.url()).unwrap(), "settings");
    assert_eq!(b.version().await.unwrap(), 0);
    assert_eq!(b.entries().await.unwrap(), (0, Vec::new()));
    let v1 = a.set("zeta", "1").await.unwrap();
    let v2 = a.set("alpha", "{\"url\":\"x\"}").await.unwrap();
    assert_eq!((v1, v2), (1, 2));
    assert_eq!(b.version().await.unwrap(), 2);
    let v3 = b.set("zeta", "").await.unwrap();
    assert_eq!(v3, 3, "a change of either node");
    let (at, all) = a.entries().await.unwrap();
    assert_eq!(at, 3);
    assert_eq!(
        all,
        [
            ("alpha".to_owned(), "{\"url\":\"x\"}".to_owned()),
            ("zeta".to_owned(), String::new())
        ]
    );
    // A compare-and-set: a change made on what was last read, or none.
    assert_eq!(a.set_if("zeta", "2", Some("1"), None).await.unwrap(), None);
    assert_eq!(a.set_if("alpha", "y", None, None).await.unwrap(), None);
    assert_eq!(a.version().await.unwrap(), 3, "nothing changed");
    assert_eq!(
        a.set_if("zeta", "2", Some(""), None).await.unwrap(),
        Some(4)
    );
    assert_eq!(a.set_if("new", "n", None, None).await.unwrap(), Some(5));
    assert_eq!(b.get("zeta").await.unwrap().as_deref(), Some("2"));
    assert_eq!(b.get("absent").await.unwrap(), None);
    // What changed since a version, from the log (zeta at 1, 3 and 4,
    // alpha at 2, new at 5).
    let own = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(b.since(5).await.unwrap(), (5, Some(Vec::new())));
    assert_eq!(b.since(4).await.unwrap(), (5, Some(own(&[("new", "n")]))));
    assert_eq!(
        b.since(3).await.unwrap(),
        (5, Some(own(&[("new", "n"), ("zeta", "2")])))
    );
    // zeta changed twice in (1, 5]: the log cannot say, read everything.
    assert_eq!(b.since(1).await.unwrap(), (5, None));
    // A change by a node that keeps no log (an older relay) is noticed.
    let mut raw = RedisConnection::open(&redis.url()).unwrap();
    let _: i64 = redis::cmd("INCR")
        .arg(format!("{}:v", a.key()))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(b.since(5).await.unwrap(), (6, None));
    let t = a.server_ms().await.unwrap();
    let local = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(t.abs_diff(local) < 60_000, "the server's clock, in ms: {t}");
    let other = RedisMap::new(RedisConnection::open(&redis.url()).unwrap(), "elsewhere");
    assert_eq!(other.version().await.unwrap(), 0, "maps are apart");
    // Guarded by another entry: written only while that one holds what
    // the writer read too (an endpoint on its application).
    let guard = Some(("app:shop", Some("live")));
    assert_eq!(
        a.set_if("ep", "e", None, guard).await.unwrap(),
        None,
        "no app yet"
    );
    assert_eq!(
        a.set_if("app:shop", "live", None, None).await.unwrap(),
        Some(7)
    );
    assert_eq!(a.set_if("ep", "e", None, guard).await.unwrap(), Some(8));
    assert_eq!(
        a.set_if("app:shop", "gone", Some("live"), None)
            .await
            .unwrap(),
        Some(9)
    );
    assert_eq!(
        a.set_if("ep", "f", Some("e"), guard).await.unwrap(),
        None,
        "app changed"
    );
    let absent = Some(("app:none", None));
    assert_eq!(
        a.set_if("ep", "f", Some("e"), absent).await.unwrap(),
        Some(10)
    );
    assert_eq!(b.get("ep").await.unwrap().as_deref(), Some("f"));
}

/// A map larger than one page reads whole, as of one version, while
/// another node changes it during the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_map_reads_whole_a_page_at_a_time() {
    if !available("a_large_map_reads_whole_a_page_at_a_time") {
        return;
    }
    let redis = RedisServer::start();
    let a = RedisMap::new(RedisConnection::open(&redis.url()).unwrap(), "large");
    let b = RedisMap::new(RedisConnection::open(&redis.url()).unwrap(), "large");
    const N: usize = 2_500;
    for i in 0..N {
        a.set(&format!("d{i:05}"), &format!("v{i}")).await.unwrap();
    }
    let (at, all) = b.entries().await.unwrap();
    assert_eq!(at, N as u64);
    assert_eq!(all.len(), N, "every entry once");
    assert_eq!(all[0], ("d00000".to_owned(), "v0".to_owned()));
    assert_eq!(
        all[N - 1],
        (format!("d{:05}", N - 1), format!("v{}", N - 1))
    );
    // Changed while read: the read is as of a version, with the changes.
    let (read, _) = tokio::join!(b.entries(), async {
        for i in 0..50 {
            a.set(&format!("d{i:05}"), "changed").await.unwrap();
        }
    });
    let (at, all) = read.unwrap();
    let changed = all.iter().filter(|(_, v)| v == "changed").count() as u64;
    assert_eq!(all.len(), N);
    assert_eq!(changed, at - N as u64, "as of version {at}");
}

/// A fleet's idempotency key names one request whatever queue its job went
/// to: the same request again names the first id, another request (another
/// destination, another body) is a conflict; a refused job's key is given
/// back; a key whose admission's end was never recorded is found pending
/// under its id, and the queue tells whether that id got in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_key_names_one_request_and_a_pending_one_resolves() {
    use super::keys::{KeyClaim, RedisKeys};
    if !available("a_fleet_key_names_one_request_and_a_pending_one_resolves") {
        return;
    }
    let redis = RedisServer::start();
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let keys = RedisKeys::new(conn.clone(), "hooks");
    let billing = RedisQueue::new(conn.clone(), "billing", "a").with_status(DAY, 100);
    let (k, request) = ("4:acme:order-1", "billing|1f");
    assert_eq!(
        keys.claim(k, request, "71", DAY).await.unwrap(),
        KeyClaim::New
    );
    // Claimed again before it is accepted: pending under the first id.
    assert_eq!(
        keys.claim(k, request, "72", DAY).await.unwrap(),
        KeyClaim::Pending("71".into())
    );
    added(
        billing
            .admit_fresh("71", b"one", 10, Some("acme"))
            .await
            .unwrap(),
    );
    // The pending claim's admission finds the id taken: seen, not twice.
    assert_eq!(
        billing
            .admit_fresh("71", b"one", 10, Some("acme"))
            .await
            .unwrap(),
        Admission::Seen { id: "71".into() }
    );
    assert!(keys.accept(k, "71", DAY).await.unwrap());
    assert!(!keys.accept(k, "72", DAY).await.unwrap(), "not its id");
    assert_eq!(
        keys.claim(k, request, "73", DAY).await.unwrap(),
        KeyClaim::Repeat("71".into())
    );
    for other in ["shipping|1f", "billing|2e"] {
        assert_eq!(
            keys.claim(k, other, "74", DAY).await.unwrap(),
            KeyClaim::Conflict("71".into()),
            "{other}"
        );
    }
    // Another scope's key is its own.
    assert_eq!(
        keys.claim("6:globex:order-1", request, "75", DAY)
            .await
            .unwrap(),
        KeyClaim::New
    );
    // Refused: given back, and a retry claims it anew.
    assert!(keys.release("6:globex:order-1", "75").await.unwrap());
    assert!(
        !keys.release(k, "71").await.unwrap(),
        "an accepted key stays"
    );
    assert_eq!(
        keys.claim("6:globex:order-1", request, "76", DAY)
            .await
            .unwrap(),
        KeyClaim::New
    );
}

/// The queue's counts are the fleet's: every node's admissions, refusals
/// (a full queue, or one told), deliveries and dead letters, written by the
/// scripts that make them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_counts_what_every_node_did() {
    use super::queue::QueueCounts;
    if !available("the_queue_counts_what_every_node_did") {
        return;
    }
    let redis = RedisServer::start();
    let a = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "billing", "a")
        .with_status(DAY, 100)
        .with_dead_letters(100);
    let b = RedisQueue::new(RedisConnection::open(&redis.url()).unwrap(), "billing", "b")
        .with_status(DAY, 100)
        .with_dead_letters(100);
    for q in [&a, &b, &a] {
        added(q.admit(&fresh(), b"x", None, 3, DAY).await.unwrap());
    }
    assert!(matches!(
        b.admit(&fresh(), b"x", None, 3, DAY).await.unwrap(),
        Admission::Full { .. }
    ));
    b.count_refused().await.unwrap();
    let held = a.claim(3).await.unwrap();
    assert_eq!(held.len(), 3);
    let ends = vec![
        Ending::delivered(held[0].stream_id.clone(), Some(204)),
        Ending::delivered(held[1].stream_id.clone(), Some(200)),
        Ending::dead_lettered(held[2].stream_id.clone(), Some(500), "failed"),
    ];
    assert_eq!(a.end(&ends).await.unwrap(), 3);
    // Ended twice (a late node): counted once.
    assert_eq!(a.end(&ends[..1]).await.unwrap(), 0);
    assert_eq!(
        b.counts().await.unwrap(),
        QueueCounts {
            accepted: 3,
            refused: 2,
            delivered: 2,
            dead_lettered: 1,
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_evicts_its_oldest_unclaimed_entry_or_defers_the_new_one() {
    if !available("a_full_queue_evicts_its_oldest_unclaimed_entry_or_defers_the_new_one") {
        return;
    }
    let redis = RedisServer::start();
    let conn = || RedisConnection::open(&redis.url()).unwrap();
    // Head-drop: a bound of 3, one entry claimed (being delivered).
    let q = RedisQueue::new(conn(), "evict", "a")
        .with_status(DAY, 100)
        .with_dead_letters(100)
        .with_overflow(dripfeed::Overflow::HeadDrop);
    let ids: Vec<String> = (0..3).map(|_| fresh()).collect();
    for (n, id) in ids.iter().enumerate() {
        added(
            q.admit(id, format!("{n}").as_bytes(), None, 3, DAY)
                .await
                .unwrap(),
        );
    }
    let claimed = q.claim(1).await.unwrap();
    assert_eq!(claimed[0].id, ids[0]);
    let newest = fresh();
    match q
        .admit(&newest, b"3", Some("acme:k"), 3, DAY)
        .await
        .unwrap()
    {
        Admission::Evicted { id, depth, evicted } => {
            assert_eq!((id, depth), (newest.clone(), 3));
            assert_eq!(evicted, ids[1], "the oldest no consumer claimed");
        }
        other => panic!("not evicted: {other:?}"),
    }
    let dead = q.dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id.as_str(), dead[0].reason.as_str()),
        (ids[1].as_str(), "evicted")
    );
    assert_eq!(dead[0].job, b"1");
    let status = q.status(&ids[1]).await.unwrap().unwrap();
    assert_eq!(status.state, JobState::DeadLettered);
    // The rest are claimed in order, the newest last; nothing claimed twice.
    let rest: Vec<String> = q
        .claim(10)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(rest, [ids[2].clone(), newest.clone()]);
    // Every entry claimed or waiting: nothing to evict, so refused.
    assert!(matches!(
        q.admit(&fresh(), b"4", None, 3, DAY).await.unwrap(),
        Admission::Full { depth: 3 }
    ));

    // Dead-letter: the arriving job goes to the dead letters at once, its
    // key remembered.
    let d = RedisQueue::new(conn(), "defer", "a")
        .with_status(DAY, 100)
        .with_dead_letters(100)
        .with_overflow(dripfeed::Overflow::DeadLetter);
    added(d.admit(&fresh(), b"0", None, 1, DAY).await.unwrap());
    let late = fresh();
    assert_eq!(
        d.admit(&late, b"1", Some("acme:late"), 1, DAY)
            .await
            .unwrap(),
        Admission::Deferred { id: late.clone() }
    );
    assert_eq!(
        d.admit(&fresh(), b"1", Some("acme:late"), 1, DAY)
            .await
            .unwrap(),
        Admission::Repeat { id: late.clone() },
        "a repeat answers the deferred one"
    );
    let dead = d.dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id.as_str(), dead[0].reason.as_str()),
        (late.as_str(), "overflow")
    );
    let status = d.status(&late).await.unwrap().unwrap();
    assert_eq!(status.state, JobState::DeadLettered);
    assert_eq!(d.depth().await.unwrap(), 1, "nothing queued for it");
    let counts = d.counts().await.unwrap();
    assert_eq!((counts.accepted, counts.dead_lettered), (1, 1));
}

/// What needs no server: statuses and endings read and made, keys named,
/// durability judged.
mod pure {
    use std::time::Duration;

    use dripfeed::global::RedisConnection;

    use super::super::keys::RedisKeys;
    use super::super::map::RedisMap;
    use super::super::persistence::{Durability, Persistence};
    use super::super::queue::{Purposes, RedisQueue};
    use super::super::queue_status::{Ending, JobState, JobStatus};

    #[test]
    fn a_status_reads_back_and_an_ending_says_what_it_was() {
        let s = JobStatus::parse("r|2|503|1700000000500|1700000000000||1-0|acme", false).unwrap();
        assert_eq!(
            (s.state, s.attempts, s.last_status),
            (JobState::RetryWaiting, 2, Some(503))
        );
        assert_eq!(s.owner.as_deref(), Some("acme"));
        assert_eq!(
            JobStatus::parse("q|0|||17||1-0|", true).unwrap().state,
            JobState::InFlight
        );
        assert!(JobStatus::parse("nonsense", false).is_none());
        assert!(!Ending::delivered("1-0".into(), Some(204)).dead_lettered);
        let e = Ending::dead_lettered("1-0".into(), None, "failed").with_error("connect: refused");
        assert!(e.dead_lettered && e.reason == "failed");
        assert_eq!(e.error, "connect: refused");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn keys_are_named_by_destination_and_tagged() {
        let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
        let links = Purposes::new(&conn).with_admitters(std::slice::from_ref(&conn));
        let queue = RedisQueue::sharing(std::sync::Arc::new(links), "billing", "node-a".into())
            .with_status(Duration::from_secs(86_400), 100_000)
            .with_dead_letters(100_000)
            .with_overflow(dripfeed::Overflow::HeadDrop)
            .with_replicas(1, Duration::from_millis(100));
        assert_eq!(queue.stream_key(), "dripfeed:q:{billing}:s");
        assert_eq!(queue.overflow(), dripfeed::Overflow::HeadDrop);
        let keys = RedisKeys::new(conn.clone(), "hooks");
        assert_eq!(
            keys.key_of("4:acme:order-1"),
            "dripfeed:k:hooks:4:acme:order-1"
        );
        let map = RedisMap::new(conn, "destinations");
        assert_eq!(map.key(), "dripfeed:map:{destinations}");
    }

    #[test]
    fn durability_is_judged_from_the_settings() {
        assert_eq!(Durability::parse("everysec"), Some(Durability::Everysec));
        assert_eq!(Durability::Always.as_str(), "always");
        assert_eq!(Durability::parse("sometimes"), None);
        let p = Persistence {
            node: "redis".into(),
            appendonly: true,
            appendfsync: "everysec".into(),
            maxmemory_policy: "noeviction".into(),
        };
        assert_eq!(p.durability(), Durability::Everysec);
        let evicting = Persistence {
            maxmemory_policy: "allkeys-lru".into(),
            ..p.clone()
        };
        assert_eq!(evicting.durability(), Durability::None);
        let off = Persistence {
            appendonly: false,
            ..p
        };
        let why = off.shortfall(Durability::Everysec).unwrap();
        assert!(why.contains("appendonly no"), "{why}");
        assert!(off.shortfall(Durability::None).is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_taken_once_its_copies_are_made_once_and_old_ones_are_forgotten() {
    use super::events::{Bounds, Ended, Posted, RedisEvents};
    use crate::events::record::{AttemptRecord, EventRecord};
    if !available("an_event_is_taken_once_its_copies_are_made_once_and_old_ones_are_forgotten") {
        return;
    }
    let redis = RedisServer::start();
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let events = RedisEvents::new(conn.clone(), 60_000, 1_000);
    let record = |n: u64| EventRecord {
        app: "acme".into(),
        kind: format!("invoice.n{n}"),
        created_ms: n,
        tenant: None,
        key: None,
        copies: vec!["inv".into(), "all".into()],
    };
    // Taken once; a repeat of its key answers it; an id held is refused.
    let post = |id: u64, key: Option<&'static str>, oldest: u64| {
        let (events, r) = (events.clone(), record(id));
        async move {
            let bounds = Bounds { oldest, since: 0 };
            events.post(None, id, &r, b"{}", key, bounds).await.unwrap()
        }
    };
    assert_eq!(post(100, Some("0::k1"), 0).await, Posted::New);
    assert_eq!(
        post(101, Some("0::k1"), 0).await,
        Posted::Repeat { id: 100, copies: 2 }
    );
    // (Another application's.) One made again from id 50 on still knows
    // its key; made again from 150 on, the key is an earlier one's: taken
    // anew (then named by the new event), once.
    let again = |id: u64, since: u64| {
        let r = EventRecord {
            app: "beta".into(),
            ..record(id)
        };
        let events = events.clone();
        async move {
            let key = Some("0::k2");
            events
                .post(None, id, &r, b"{}", key, Bounds { oldest: 0, since })
                .await
                .unwrap()
        }
    };
    assert_eq!(again(110, 0).await, Posted::New);
    assert_eq!(again(111, 50).await, Posted::Repeat { id: 110, copies: 2 });
    assert_eq!(again(160, 150).await, Posted::New);
    assert_eq!(again(161, 150).await, Posted::Repeat { id: 160, copies: 2 });
    // The earlier application's event forgotten (older than the oldest
    // kept): the key it had is the new one's now, and stays.
    let r = EventRecord {
        app: "beta".into(),
        ..record(170)
    };
    let bounds = Bounds {
        oldest: 150,
        since: 150,
    };
    let posted = events.post(None, 170, &r, b"{}", None, bounds).await;
    assert_eq!(posted.unwrap(), Posted::New);
    assert_eq!(again(171, 150).await, Posted::Repeat { id: 160, copies: 2 });
    // The sweep reads the applications that posted, however many it asks
    // for (Redis refused a count past i64::MAX, and the sweep never ran).
    events.posting("beta", 5).await.unwrap();
    for most in [1, 1_000, usize::MAX] {
        let apps = events.posted_before(10, most).await.unwrap();
        assert_eq!(apps, vec![("beta".to_owned(), "5".to_owned())], "{most}");
    }
    assert_eq!(post(100, None, 0).await, Posted::Taken);
    assert_eq!(post(200, None, 0).await, Posted::New);
    assert_eq!(
        events.newest("acme", None, 10).await.unwrap(),
        vec![200, 100]
    );
    assert_eq!(
        events.newest("acme", Some(200), 10).await.unwrap(),
        vec![100]
    );
    assert_eq!(
        events.window("acme", (150, 250), 10).await.unwrap(),
        vec![200]
    );
    // Both wait for their fan-out until it is marked made.
    assert_eq!(
        events.unqueued("acme", None, 1_000, 10).await.unwrap(),
        vec![100, 200]
    );
    events.fanned_out("acme", 100).await.unwrap();
    assert_eq!(
        events.unqueued("acme", None, 1_000, 10).await.unwrap(),
        vec![200]
    );

    // A copy made twice (a fan-out repeated by another relay) is made once;
    // a full queue dead-letters a copy rather than refuse it.
    let q = RedisQueue::new(conn.clone(), "inv", "a")
        .with_status(DAY, 100)
        .with_dead_letters(100);
    let fresh_copy = (super::queue::Again::Never, false);
    assert!(matches!(
        q.admit_copy("100", b"c", 1, None, fresh_copy)
            .await
            .unwrap(),
        Admission::Added { .. }
    ));
    assert!(matches!(
        q.admit_copy("100", b"c", 1, None, fresh_copy)
            .await
            .unwrap(),
        Admission::Seen { .. }
    ));
    assert!(matches!(
        q.admit_copy("200", b"c", 1, None, fresh_copy)
            .await
            .unwrap(),
        Admission::Deferred { .. }
    ));
    assert_eq!(
        q.status("200").await.unwrap().unwrap().state,
        JobState::DeadLettered
    );
    // Recovered (its letter gone): admitted again only while dead-lettered.
    let dead = (super::queue::Again::Dead, false);
    assert!(matches!(
        q.admit_copy("200", b"c", 10, None, dead).await.unwrap(),
        Admission::Added { .. }
    ));
    assert!(matches!(
        q.admit_copy("200", b"c", 10, None, dead).await.unwrap(),
        Admission::Seen { .. }
    ));

    // Attempts and ends are recorded beside the event; a resend is
    // granted once while on its way, and counted.
    let attempt = AttemptRecord {
        at_ms: 5,
        status: 503,
        duration_ms: 1,
        error: Some("status".into()),
        response: None,
    };
    events
        .attempted("acme", 100, "inv", &attempt, Ended::No)
        .await
        .unwrap();
    events
        .attempted("acme", 100, "inv", &attempt, Ended::Delivered)
        .await
        .unwrap();
    events
        .ended("acme", 100, "all", Ended::DeadLettered("overflow".into()))
        .await
        .unwrap();
    let read = events
        .copies("acme", 100, &["inv".into(), "all".into()])
        .await
        .unwrap();
    assert_eq!(read[0].attempts, vec![attempt.clone(), attempt.clone()]);
    assert_eq!(read[0].ended, Ended::Delivered);
    assert_eq!(read[1].ended, Ended::DeadLettered("overflow".into()));
    assert!(events.again("acme", 100, "all", 60_000).await.unwrap());
    assert!(
        !events.again("acme", 100, "all", 60_000).await.unwrap(),
        "granted once while on its way"
    );
    let read = events.copies("acme", 100, &["all".into()]).await.unwrap();
    assert!(
        matches!(read[0].ended, Ended::Again(_)),
        "{:?}",
        read[0].ended
    );
    assert_eq!(read[0].resent, 1);
    // An event no longer kept records nothing.
    events
        .attempted("acme", 999, "inv", &attempt, Ended::No)
        .await
        .unwrap();
    assert!(
        events.copies("acme", 999, &["inv".into()]).await.unwrap()[0]
            .attempts
            .is_empty()
    );

    // Older than the oldest kept: forgotten with its key, on the next post.
    assert_eq!(post(300, None, 150).await, Posted::New);
    assert_eq!(
        events.newest("acme", None, 10).await.unwrap(),
        vec![300, 200]
    );
    assert!(events.record("acme", 100).await.unwrap().is_none());
    assert_eq!(
        post(301, Some("0::k1"), 150).await,
        Posted::New,
        "its key forgotten with it"
    );
    assert_eq!(
        events.record("acme", 300).await.unwrap().unwrap().kind,
        "invoice.n300"
    );
    assert_eq!(events.payload("acme", 300).await.unwrap().unwrap(), b"{}");
    // Another application's events are its own.
    assert!(events.newest("globex", None, 10).await.unwrap().is_empty());
}
