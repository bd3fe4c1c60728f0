//! Every submitted job ends in exactly one outcome (or is still queued or in
//! flight), and `stats()` and the metrics agree with the caller's own count.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::{Attempt, ChannelSink, Delivery, Outcome, Overflow, Throttle};
use metrics_util::debugging::DebuggingRecorder;
use proptest::prelude::*;
use support::counters;

/// Where the test saw each job go.
#[derive(Default)]
struct Ledger {
    refused: u64,
    deferred: u64,
    delivered: Vec<u64>,
    evicted: Vec<u64>,
    expired: Vec<u64>,
    failed: Vec<u64>,
}

fn run(seed: u64, policy: Overflow, steps: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let recorder = DebuggingRecorder::new();
    rt.block_on(async {
        let mut rng = fastrand::Rng::with_seed(seed);
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let (sink, mut letters) = ChannelSink::new(1_000_000).unwrap();
        let l = ledger.clone();
        let downstream = move |job: &u64, _: Attempt| {
            let (job, l) = (*job, l.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(job % 7)).await;
                match job % 11 {
                    0 => Delivery::Failed,
                    1 => panic!("boom"),
                    _ => {
                        l.lock().unwrap().delivered.push(job);
                        Delivery::Done
                    }
                }
            }
        };
        let (le, lx, lf) = (ledger.clone(), ledger.clone(), ledger.clone());
        let mut builder = Throttle::builder()
            .name("acct")
            .drain_rate(50.0 + rng.f64() * 500.0)
            .max_rate(1000.0)
            .latency_budget(Duration::from_millis(50 + rng.u64(0..300)))
            .overflow(policy)
            .max_in_flight(1 + rng.usize(0..8))
            .on_evicted(move |j| le.lock().unwrap().evicted.push(j))
            .on_expired(move |j| lx.lock().unwrap().expired.push(j))
            .on_failed(move |j| lf.lock().unwrap().failed.push(j));
        if rng.bool() {
            builder = builder.max_queue_wait(Duration::from_millis(100 + rng.u64(0..200)));
        }
        if policy == Overflow::DeadLetter || rng.bool() {
            builder = builder.dead_letter(sink);
        } else {
            drop(sink);
        }
        let (throttle, _drain) =
            metrics::with_local_recorder(&recorder, || builder.build(downstream)).unwrap();

        let mut submitted = 0u64;
        // The largest admission bound so far: queued jobs are never pulled
        // back when it shrinks, so the depth may exceed the current one.
        let mut peak = throttle.capacity();
        for step in 0..steps {
            match rng.u8(0..10) {
                0..=6 => {
                    for _ in 0..rng.usize(1..60) {
                        let job = submitted;
                        submitted += 1;
                        match throttle.try_submit(job) {
                            Ok(a) if a.is_deferred() => ledger.lock().unwrap().deferred += 1,
                            Ok(_) => {}
                            Err(r) => {
                                assert_eq!(r.into_job(), job);
                                ledger.lock().unwrap().refused += 1;
                            }
                        }
                    }
                }
                7 => {
                    let _ = throttle.set_drain_rate(10.0 + rng.f64() * 990.0);
                    peak = peak.max(throttle.capacity());
                }
                8 => throttle.pause(),
                _ => throttle.resume(),
            }
            tokio::time::sleep(Duration::from_millis(rng.u64(0..100))).await;
            if step % 10 == 0 {
                let s = throttle.stats();
                assert_eq!(s.submitted(), submitted, "mid-run identity at step {step}");
                assert!(
                    s.depth() <= peak as u64,
                    "depth {} above the bound {peak}",
                    s.depth()
                );
            }
        }
        throttle.resume();
        let report = throttle
            .shutdown(Duration::from_millis(rng.u64(0..2000)))
            .await;
        let s = &report.stats;
        let l = ledger.lock().unwrap();
        let mut dead = 0;
        while letters.try_recv().is_ok() {
            dead += 1;
        }
        assert_eq!(s.submitted(), submitted);
        assert_eq!((s.depth(), s.in_flight()), (0, 0), "nothing left behind");
        assert_eq!(s.outcome(Outcome::Refused), l.refused);
        assert_eq!(s.outcome(Outcome::Delivered), l.delivered.len() as u64);
        assert_eq!(s.outcome(Outcome::Evicted), l.evicted.len() as u64);
        assert_eq!(s.outcome(Outcome::Expired), l.expired.len() as u64);
        assert_eq!(s.outcome(Outcome::Failed), l.failed.len() as u64);
        assert_eq!(s.outcome(Outcome::DeadLettered), dead);
        assert_eq!(s.outcome(Outcome::Returned), report.returned.len() as u64);
        // each job in exactly one place: no id seen twice across the ledgers
        let mut ids: Vec<u64> = l
            .delivered
            .iter()
            .chain(&l.evicted)
            .chain(&l.expired)
            .chain(&l.failed)
            .chain(&report.returned)
            .copied()
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "a job counted in two places");
        assert!(l.deferred <= dead);

        let m = counters(&recorder);
        for o in Outcome::ALL {
            let key = format!("leaky_bucket_jobs_total{{{}}}", o.as_str());
            assert_eq!(m.get(&key).copied().unwrap_or(0), s.outcome(o), "{key}");
        }
        assert_eq!(m["leaky_bucket_emitted_total{}"], s.emitted());
        assert_eq!(m["leaky_bucket_admitted_total{}"], s.admitted());
        assert_eq!(m["leaky_bucket_expired_total{}"], s.expired());
        assert_eq!(
            m["leaky_bucket_delivery_failures_total{}"],
            s.delivery_failures()
        );
        let overflow_key = format!("leaky_bucket_overflow_total{{{}}}", policy.as_str());
        assert_eq!(m[&overflow_key], s.overflow(policy));
    });
}

#[test]
fn seeded_runs_for_every_policy() {
    for seed in 0..6 {
        for policy in [Overflow::TailDrop, Overflow::HeadDrop, Overflow::DeadLetter] {
            run(seed, policy, 120);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn random_runs_account_for_every_job(seed in any::<u64>(), p in 0usize..3, steps in 10usize..80) {
        let policy = [Overflow::TailDrop, Overflow::HeadDrop, Overflow::DeadLetter][p];
        run(seed, policy, steps);
    }
}
