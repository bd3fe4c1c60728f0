//! Per-key buckets on a throttle: fairness between tenants, exact waits, and
//! no debt for jobs the shared queue refused.

use crate::support;

use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::{ChannelSink, Overflow, Reason, Throttle};
use support::Recorder;
use tokio::time::{Instant, sleep};

#[tokio::test(start_paused = true)]
async fn a_hot_tenant_is_refused_and_the_polite_ones_never_are() {
    // each tenant: burst 20, 10/s; shared drain 200/s
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(200.0)
        .latency_budget(Duration::from_secs(2))
        .per_key(1_000, Quota::per_second(10.0).burst(20.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    let (mut hot_ok, mut hot_429, mut polite_refused, mut polite_ok) = (0, 0, 0, 0);
    let start = Instant::now();
    // 30 s: the hot tenant sends 100/s (10× its quota), nine others 5/s each
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while start.elapsed() < Duration::from_secs(30) {
        tick.tick().await;
        match throttle.try_submit(dripfeed::Submission::new(0).key("hot", 1.0)) {
            Ok(_) => hot_ok += 1,
            Err(r) => {
                assert_eq!(r.reason(), Reason::OverQuota);
                assert_eq!(r.status(), 429);
                let wait = r.retry_after().unwrap();
                assert!(
                    wait <= Duration::from_millis(120),
                    "wait for one unit at 10/s: {wait:?}"
                );
                hot_429 += 1;
            }
        }
        let n = (start.elapsed().as_millis() / 10) as u32;
        if n.is_multiple_of(20) {
            for tenant in 0..9u32 {
                match throttle.try_submit(
                    dripfeed::Submission::new(tenant)
                        .key(dripfeed::Key::of(&("polite", tenant)), 1.0),
                ) {
                    Ok(_) => polite_ok += 1,
                    Err(_) => polite_refused += 1,
                }
            }
        }
    }
    assert_eq!(polite_refused, 0, "polite tenants were never refused");
    assert!(polite_ok >= 9 * 149, "{polite_ok}");
    // the hot tenant gets its burst plus 10/s: about 20 + 300 of ~3,000
    assert!((300..=340).contains(&hot_ok), "hot admitted {hot_ok}");
    assert!(hot_429 >= 2_600, "hot refused {hot_429}");
    assert_eq!(throttle.stats().rejected(Reason::OverQuota), hot_429);
    assert_eq!(throttle.keyed().unwrap().len(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_job_the_queue_refuses_leaves_no_debt_on_its_key() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(2)
        .per_key(100, Quota::per_second(1.0).burst(10.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle.pause();
    throttle
        .try_submit(dripfeed::Submission::new(1).key("a", 3.0))
        .unwrap();
    throttle
        .try_submit(dripfeed::Submission::new(2).key("b", 3.0))
        .unwrap();
    let refused = throttle
        .try_submit(dripfeed::Submission::new(3).key("a", 3.0))
        .unwrap_err();
    assert_eq!(
        refused.reason(),
        Reason::Overloaded,
        "the key had room: the queue refused"
    );
    assert_eq!(throttle.key_debt("a"), 3.0, "only the admitted job's cost");
    // over quota and queue full: the key is checked first
    let refused = throttle
        .try_submit(dripfeed::Submission::new(4).key("a", 8.0))
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::OverQuota);
}

#[tokio::test(start_paused = true)]
async fn over_quota_waits_are_exact_and_carry_the_key_limit() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .per_key(100, Quota::per_second(2.0).burst(10.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle
        .try_submit(dripfeed::Submission::new(1).key(7u64, 9.0))
        .unwrap();
    sleep(Duration::from_millis(500)).await; // debt 9 - 0.5 × 2 = 8
    let refused = throttle
        .try_submit(dripfeed::Submission::new(2).key(7u64, 5.0))
        .unwrap_err();
    // (8 + 5 - 10) / 2 = 1.5 s
    let wait = refused.retry_after().unwrap();
    assert!(
        wait >= Duration::from_millis(1500) && wait <= Duration::from_millis(1800),
        "{wait:?}"
    );
    let limit = refused.rate_limit().unwrap();
    assert_eq!(limit.policy_header(), r#""key";q=10;w=5"#);
    assert_eq!(limit.header(), r#""key";r=2;t=2"#);
    sleep(Duration::from_millis(1500)).await;
    assert!(
        throttle
            .try_submit(dripfeed::Submission::new(3).key(7u64, 5.0))
            .is_ok(),
        "fits exactly after the wait"
    );
}

#[tokio::test(start_paused = true)]
async fn deferred_jobs_owe_their_cost_and_refused_ones_get_it_back() {
    let (sink, _letters) = ChannelSink::new(1).unwrap();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(1)
        .overflow(Overflow::DeadLetter)
        .dead_letter(sink)
        .per_key(100, Quota::per_second(1.0).burst(10.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle.pause();
    assert!(
        throttle
            .try_submit(dripfeed::Submission::new(1).key("k", 2.0))
            .unwrap()
            .is_queued()
    );
    assert!(
        throttle
            .try_submit(dripfeed::Submission::new(2).key("k", 2.0))
            .unwrap()
            .is_deferred()
    );
    assert_eq!(throttle.key_debt("k"), 4.0);
    let refused = throttle
        .try_submit(dripfeed::Submission::new(3).key("k", 2.0))
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::Overloaded, "the sink is full");
    assert_eq!(throttle.key_debt("k"), 4.0, "refunded");
}

#[tokio::test(start_paused = true)]
async fn invalid_costs_and_unkeyed_throttles_are_typed_refusals() {
    let (plain, _d) = Throttle::builder()
        .drain_rate(10.0)
        .build(Recorder::<u32>::new())
        .unwrap();
    assert_eq!(
        plain
            .try_submit(dripfeed::Submission::new(1).key("k", 1.0))
            .unwrap_err()
            .reason(),
        Reason::Invalid
    );
    let (keyed, _d) = Throttle::builder()
        .drain_rate(10.0)
        .per_key(10, Quota::per_second(1.0).burst(5.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 5.5] {
        let r = keyed
            .try_submit(dripfeed::Submission::new(9).key("k", bad))
            .unwrap_err();
        assert_eq!(
            (r.reason(), r.status(), r.into_job()),
            (Reason::Invalid, 400, 9),
            "cost {bad}"
        );
    }
    assert_eq!(keyed.key_debt("k"), 0.0);
    assert_eq!(keyed.stats().depth(), 0, "no place kept by a refused job");
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_keys_stays_within_the_table() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1_000_000.0)
        .capacity(1_000_000)
        .per_key(1_000, Quota::per_second(1.0).burst(5.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    for i in 0..50_000u32 {
        throttle
            .try_submit(dripfeed::Submission::new(i).key(i, 1.0))
            .unwrap();
        assert!(throttle.keyed().unwrap().len() <= 1_000);
    }
    assert!(throttle.keyed().unwrap().evictions() >= 49_000);
}
