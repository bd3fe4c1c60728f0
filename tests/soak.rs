//! Chaos soak on paused time: a downstream that is randomly slow, fails,
//! panics, hangs past the delivery timeout and has outages; bursty
//! producers; random rate changes; retries and deadlines; shutdown. Every
//! submitted job must end in exactly one counted place, the metrics must
//! agree, and no job may be delivered twice (a job is tried again only
//! after a failed attempt, and its attempt numbers say so).

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::{
    Attempt, ChannelSink, DeadLetterReason, Delivery, Outcome, Overflow, RetryPolicy, Stats,
    Throttle,
};
use metrics_util::debugging::DebuggingRecorder;
use support::counters;
use tokio::time::{Instant, sleep};

/// What the downstream saw: per job, each attempt's number and whether it was delivered.
type Seen = Arc<Mutex<HashMap<u64, Vec<(u32, bool)>>>>;

#[derive(Default)]
struct Ends {
    refused: u64,
    deferred: u64,
    evicted: Vec<u64>,
    expired: Vec<u64>,
    failed: Vec<u64>,
}

struct Report {
    stats: Stats,
    dead_lettered: u64,
}

fn soak(seed: u64) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let recorder = DebuggingRecorder::new();
    rt.block_on(async {
        let start = Instant::now();
        let mut rng = fastrand::Rng::with_seed(seed);
        let seen: Seen = Arc::default();
        let ends = Arc::new(Mutex::new(Ends::default()));
        let chaos = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed ^ 0x5eed)));
        let outage = {
            let at = Duration::from_millis(rng.u64(2_000..15_000));
            (at, at + Duration::from_millis(rng.u64(500..4_000)))
        };
        let s2 = seen.clone();
        let downstream = move |job: &u64, attempt: Attempt| {
            let (job, seen, chaos) = (*job, s2.clone(), chaos.clone());
            async move {
                let roll = chaos.lock().unwrap().u32(0..100);
                let t = start.elapsed();
                let in_outage = t >= outage.0 && t < outage.1;
                let result = if in_outage {
                    Delivery::Retry {
                        after: Some(Duration::from_millis(200)),
                    }
                } else {
                    match roll {
                        0..=4 => {
                            // hang past the delivery timeout
                            seen.lock()
                                .unwrap()
                                .entry(job)
                                .or_default()
                                .push((attempt.number(), false));
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                        5..=7 => {
                            seen.lock()
                                .unwrap()
                                .entry(job)
                                .or_default()
                                .push((attempt.number(), false));
                            panic!("chaos panic on job {job}");
                        }
                        8..=14 => Delivery::Retry { after: None },
                        15..=17 => Delivery::Failed,
                        18..=29 => {
                            sleep(Duration::from_millis(200 + u64::from(roll) * 5)).await;
                            Delivery::Done
                        }
                        _ => Delivery::Done,
                    }
                };
                seen.lock()
                    .unwrap()
                    .entry(job)
                    .or_default()
                    .push((attempt.number(), result.is_done()));
                result
            }
        };
        let policy =
            [Overflow::TailDrop, Overflow::HeadDrop, Overflow::DeadLetter][rng.usize(0..3)];
        let (sink, mut letters) = ChannelSink::new(rng.usize(50..5_000)).unwrap();
        let (e1, e2, e3) = (ends.clone(), ends.clone(), ends.clone());
        let builder = Throttle::builder()
            .name("soak")
            .drain_rate(20.0 + rng.f64() * 300.0)
            .max_rate(1_000.0)
            .latency_budget(Duration::from_millis(200 + rng.u64(0..2_000)))
            .overflow(policy)
            .dead_letter(sink)
            .max_in_flight(1 + rng.usize(0..32))
            .deliver_timeout(Duration::from_millis(500))
            .max_queue_wait(Duration::from_millis(500 + rng.u64(0..3_000)))
            .retries(RetryPolicy::new(2 + rng.u32(0..4)).capacity(rng.usize(1..200)))
            .per_key(50, Quota::per_second(10.0).burst(20.0).unwrap())
            .on_evicted(move |j| e1.lock().unwrap().evicted.push(j))
            .on_expired(move |j| e2.lock().unwrap().expired.push(j))
            .on_failed(move |j| e3.lock().unwrap().failed.push(j));
        let (throttle, _drain) =
            metrics::with_local_recorder(&recorder, || builder.build(downstream)).unwrap();

        let mut submitted = 0u64;
        while start.elapsed() < Duration::from_secs(20) {
            match rng.u8(0..20) {
                0 => {
                    let _ = throttle.set_drain_rate(5.0 + rng.f64() * 995.0);
                }
                1..=3 => {
                    // a burst
                    for _ in 0..rng.usize(20..400) {
                        let job = submitted;
                        submitted += 1;
                        let r = if rng.bool() {
                            throttle.try_submit(job)
                        } else {
                            throttle.try_submit(
                                dripfeed::Submission::new(job)
                                    .key(rng.u8(0..80), 0.5 + rng.f64() * 5.0),
                            )
                        };
                        match r {
                            Ok(a) if a.is_deferred() => ends.lock().unwrap().deferred += 1,
                            Ok(_) => {}
                            Err(refused) => {
                                assert_eq!(refused.into_job(), job, "handed back");
                                ends.lock().unwrap().refused += 1;
                            }
                        }
                    }
                }
                _ => {
                    for _ in 0..rng.usize(0..5) {
                        let job = submitted;
                        submitted += 1;
                        if throttle.try_submit(job).is_err() {
                            ends.lock().unwrap().refused += 1;
                        }
                    }
                }
            }
            sleep(Duration::from_millis(rng.u64(1..100))).await;
            assert_eq!(throttle.stats().submitted(), submitted, "mid-run identity");
        }
        let report = throttle
            .shutdown(Duration::from_millis(rng.u64(0..3_000)))
            .await;
        let stats = report.stats;
        let mut dead = Vec::new();
        while let Ok(letter) = letters.try_recv() {
            if let DeadLetterReason::Failed { attempts } = letter.why {
                assert!(attempts >= 1);
            }
            dead.push(letter.job);
        }

        // The identity, exactly.
        let e = ends.lock().unwrap();
        assert_eq!(stats.submitted(), submitted, "seed {seed}");
        assert_eq!(
            (stats.depth(), stats.in_flight(), stats.retry_wait()),
            (0, 0, 0),
            "seed {seed}: left behind"
        );
        assert_eq!(stats.outcome(Outcome::Refused), e.refused, "seed {seed}");
        assert_eq!(
            stats.outcome(Outcome::Evicted),
            e.evicted.len() as u64,
            "seed {seed}"
        );
        assert_eq!(
            stats.outcome(Outcome::Expired),
            e.expired.len() as u64,
            "seed {seed}"
        );
        assert_eq!(
            stats.outcome(Outcome::Failed),
            e.failed.len() as u64,
            "seed {seed}"
        );
        assert_eq!(
            stats.outcome(Outcome::DeadLettered),
            dead.len() as u64,
            "seed {seed}"
        );
        assert_eq!(
            stats.outcome(Outcome::Returned),
            report.returned.len() as u64,
            "seed {seed}"
        );

        // Per job: delivered at most once, and only tried again after a failed attempt.
        let seen = seen.lock().unwrap();
        let mut delivered = 0;
        for (job, attempts) in seen.iter() {
            // Every attempt once, in order: a duplicate emission shows here.
            let numbers: Vec<u32> = attempts.iter().map(|(n, _)| *n).collect();
            let want: Vec<u32> = (1..=numbers.len() as u32).collect();
            assert_eq!(
                numbers, want,
                "seed {seed}: job {job} attempts {attempts:?}"
            );
            let done = attempts.iter().filter(|(_, ok)| *ok).count();
            assert!(done <= 1, "seed {seed}: job {job} delivered twice");
            if done == 1 {
                assert!(
                    attempts.last().is_some_and(|(_, ok)| *ok),
                    "seed {seed}: job {job} tried after delivery"
                );
                delivered += 1;
            }
        }
        assert_eq!(stats.delivered(), delivered, "seed {seed}");
        // No job in two places.
        let mut places: Vec<u64> = e
            .evicted
            .iter()
            .chain(&e.expired)
            .chain(&e.failed)
            .chain(&report.returned)
            .copied()
            .collect();
        places.extend(dead.iter().copied());
        places.extend(
            seen.iter()
                .filter(|(_, a)| a.iter().any(|(_, ok)| *ok))
                .map(|(j, _)| *j),
        );
        let n = places.len();
        places.sort();
        places.dedup();
        assert_eq!(places.len(), n, "seed {seed}: a job ended in two places");

        // The metrics agree.
        let m = counters(&recorder);
        for o in Outcome::ALL {
            assert_eq!(
                m.get(&format!("leaky_bucket_jobs_total{{{}}}", o.as_str()))
                    .copied()
                    .unwrap_or(0),
                stats.outcome(o),
                "seed {seed}: metric for {}",
                o.as_str()
            );
        }
        assert_eq!(m["leaky_bucket_emitted_total{}"], stats.emitted());
        assert_eq!(m["leaky_bucket_expired_total{}"], stats.expired());
        assert_eq!(
            m["leaky_bucket_delivery_failures_total{}"],
            stats.delivery_failures()
        );
        assert!(
            e.deferred <= dead.len() as u64,
            "seed {seed}: deferred jobs are in the sink"
        );
        Report {
            stats,
            dead_lettered: dead.len() as u64,
        }
    })
}

/// Keeps the injected panics (caught and counted by the drain) out of the output.
fn quiet_chaos_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let chaos = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.starts_with("chaos panic"));
        if !chaos {
            default(info);
        }
    }));
}

#[test]
fn ten_seeds_account_for_every_job() {
    quiet_chaos_panics();
    for seed in 0..10 {
        let r = soak(seed);
        let s = &r.stats;
        eprintln!(
            "seed {seed}: submitted {} delivered {} refused {} evicted {} expired {} dead-lettered {} returned {} failed {} | emitted {} retried {} delivery failures {}",
            s.submitted(),
            s.delivered(),
            s.outcome(Outcome::Refused),
            s.outcome(Outcome::Evicted),
            s.outcome(Outcome::Expired),
            r.dead_lettered,
            s.outcome(Outcome::Returned),
            s.outcome(Outcome::Failed),
            s.emitted(),
            s.retried(),
            s.delivery_failures(),
        );
        assert!(
            s.delivered() > 0 && s.retried() > 0 && s.delivery_failures() > 0,
            "seed {seed}: the chaos happened"
        );
    }
}
