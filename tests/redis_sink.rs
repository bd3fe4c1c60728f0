//! The Redis stream dead-letter sink: overflow and shutdown leftovers land
//! in a stream; redrive moves back only what the throttle takes. Real time,
//! bounded.

use crate::support;

use std::time::Duration;

use dripfeed::global::{RedisConnection, RedisStreamSink};
use dripfeed::{DeadLetterReason, DeadLetterSink, Delivery, Overflow, Throttle};
use support::Recorder;
use support::redis::{RedisServer, available};

fn encode(job: &u32) -> Vec<u8> {
    job.to_string().into_bytes()
}

fn decode(bytes: &[u8]) -> Option<u32> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn overflow_goes_to_the_stream_and_redrive_takes_only_what_fits() {
    if !available("overflow_goes_to_the_stream_and_redrive_takes_only_what_fits") {
        return;
    }
    let redis = RedisServer::start();
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let sink = RedisStreamSink::new(conn, "dead", 100, encode).unwrap();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .capacity(5)
        .overflow(Overflow::DeadLetter)
        .dead_letter(sink.clone())
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let mut deferred = 0;
    for job in 0..20u32 {
        if throttle.try_submit(job).unwrap().is_deferred() {
            deferred += 1;
        }
    }
    assert_eq!(deferred, 15);
    sink.flush().await.expect("stored in redis");
    assert_eq!(sink.pending(), 0);
    assert_eq!(redis.cli(&["XLEN", "dead"]).trim(), "15");
    assert!(
        redis
            .cli(&["XRANGE", "dead", "-", "+", "COUNT", "1"])
            .contains("overflow")
    );

    // A second throttle with room for 4 takes 4; the rest stay in the stream.
    let rec = Recorder::new();
    let (other, _drain2) = Throttle::builder()
        .drain_rate(1000.0)
        .capacity(4)
        .build(rec.clone())
        .unwrap();
    other.pause();
    let moved = sink.redrive(&other, 100, decode).await.unwrap();
    assert_eq!((moved.read, moved.admitted, moved.left), (4, 4, 0));
    let moved = sink.redrive(&other, 100, decode).await.unwrap();
    assert_eq!(moved.read, 0, "no room: nothing read");
    assert_eq!(redis.cli(&["XLEN", "dead"]).trim(), "11");
    other.resume();
    for _ in 0..200 {
        if rec.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut jobs = rec.jobs();
    jobs.sort_unstable(); // deliveries run concurrently
    assert_eq!(jobs, vec![5, 6, 7, 8], "oldest letters first");

    // Refused letters stay: fill the throttle behind redrive's back.
    other.pause();
    let moved = sink.redrive(&other, 100, decode).await.unwrap();
    assert_eq!(moved.admitted, 4);
    assert_eq!(redis.cli(&["XLEN", "dead"]).trim(), "7");

    // Shutdown leftovers go to the stream too.
    let report = throttle.shutdown(Duration::ZERO).await;
    assert_eq!(
        report.stats.outcome(dripfeed::Outcome::DeadLettered),
        20,
        "{:?}, {} returned",
        report.stats,
        report.returned.len()
    );
    assert_eq!(redis.cli(&["XLEN", "dead"]).trim(), "12");
    assert!(
        redis
            .cli(&["XREVRANGE", "dead", "+", "-", "COUNT", "1"])
            .contains("shutdown")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_full_buffer_hands_the_job_back_and_a_dead_redis_loses_nothing() {
    if !available("a_full_buffer_hands_the_job_back_and_a_dead_redis_loses_nothing") {
        return;
    }
    let mut redis = RedisServer::start();
    redis.kill();
    let conn = RedisConnection::open(&redis.url()).unwrap();
    let sink = RedisStreamSink::new(conn, "dead", 2, encode).unwrap();
    // The writer may hold one batch while retrying; offer until refused.
    let mut taken = 0;
    let mut refused = None;
    for job in 0..10u32 {
        match sink.try_offer(job, DeadLetterReason::Failed { attempts: 1 }) {
            Ok(()) => taken += 1,
            Err(back) => {
                refused = Some(back);
                break;
            }
        }
    }
    assert!(
        refused.is_some(),
        "the buffer is bounded; the job comes back"
    );
    assert!(taken <= 4, "{taken}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(sink.errors() > 0);
    // Still down: a flush says the letters are not stored (after its 5 s).
    let e = sink.flush().await.expect_err("redis is down");
    assert!(e.to_string().contains("not yet written"), "{e}");
    redis.restart();
    sink.flush().await.expect("stored once redis is back");
    assert_eq!(sink.pending(), 0);
    assert_eq!(redis.cli(&["XLEN", "dead"]).trim(), taken.to_string());
}
