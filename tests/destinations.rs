//! Fan-out in paused time: a dead destination holds only its own cap of the
//! shared in-flight budget, its breaker opens and its queue waits without
//! spending attempts, idle destinations hold no throttle, a full set retires
//! the idlest, and named destinations get their own metrics series while
//! the rest are summed under `_other`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dripfeed::destinations::{
    BreakerConfig, BreakerState, DestinationConfig, DestinationError, Destinations,
};
use dripfeed::{Attempt, Delivery, Downstream, Reason, RetryPolicy, Throttle};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::sleep;

/// "dead" never answers; "down" fails while the flag is up; the rest answer
/// at once. Counts the attempts "down" sees.
struct Receiver {
    name: String,
    down: Arc<AtomicBool>,
    tries: Arc<AtomicU32>,
}

#[async_trait]
impl Downstream<u32> for Receiver {
    async fn deliver(&self, _: &u32, _: Attempt) -> Delivery {
        match self.name.as_str() {
            "dead" => std::future::pending().await,
            "down" => {
                self.tries.fetch_add(1, Ordering::Relaxed);
                if self.down.load(Ordering::Relaxed) {
                    Delivery::Retry { after: None }
                } else {
                    Delivery::Done
                }
            }
            _ => Delivery::Done,
        }
    }
}

fn receivers(
    down: &Arc<AtomicBool>,
    tries: &Arc<AtomicU32>,
) -> impl Fn(&str) -> Receiver + Send + Sync + 'static {
    let (down, tries) = (down.clone(), tries.clone());
    move |name: &str| Receiver {
        name: name.to_owned(),
        down: down.clone(),
        tries: tries.clone(),
    }
}

fn flags() -> (Arc<AtomicBool>, Arc<AtomicU32>) {
    (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)))
}

#[tokio::test(start_paused = true)]
async fn a_dead_destination_holds_its_cap_and_no_more() {
    let (down, tries) = flags();
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(100.0)
            .capacity(1_000)
            .max_in_flight(3)
            .deliver_timeout(Duration::from_secs(60)),
    )
    .max_in_flight(4)
    .no_breaker()
    .build(receivers(&down, &tries))
    .unwrap();
    for job in 0..100 {
        set.try_submit("dead", job).unwrap();
        set.try_submit("healthy", job).unwrap();
    }
    sleep(Duration::from_secs(2)).await;
    let dead = set.stats("dead").unwrap();
    let healthy = set.stats("healthy").unwrap();
    assert_eq!(dead.in_flight(), 3, "the dead one holds its cap");
    assert_eq!(dead.delivered(), 0);
    assert_eq!(
        healthy.delivered(),
        100,
        "the last place of 4 served the healthy one"
    );
    assert_eq!(set.held(), 100, "what the dead one holds");
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_holds_the_queue_without_spending_attempts() {
    let (down, tries) = flags();
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(100.0)
            .capacity(50)
            .max_in_flight(1)
            .retries(
                RetryPolicy::new(10).backoff(Duration::from_millis(10), Duration::from_millis(10)),
            ),
    )
    .breaker(
        BreakerConfig::default()
            .trip_after(3)
            .cool_down(Duration::from_secs(5), Duration::from_secs(20)),
    )
    .build(receivers(&down, &tries))
    .unwrap();
    for job in 0..20 {
        set.try_submit("down", job).unwrap();
    }
    sleep(Duration::from_secs(1)).await;
    let s = set.stats("down").unwrap();
    assert_eq!(s.breaker(), BreakerState::Open);
    assert_eq!(tries.load(Ordering::Relaxed), 3, "nothing sent while open");
    assert_eq!(s.held(), 20, "the queue waits: nothing failed for it");

    // Its queue fills; the refusal asks to wait out the cool-down.
    let mut refused = None;
    for job in 100..200 {
        if let Err(r) = set.try_submit("down", job) {
            refused = Some(r);
            break;
        }
    }
    let refused = refused.expect("the queue fills");
    assert_eq!(refused.reason(), Reason::Overloaded);
    assert!(refused.retry_after().unwrap() >= Duration::from_secs(3));

    // A failed probe after 5 s doubles the cool-down; the receiver recovers
    // and the probe after 10 s more closes it; the queue drains.
    sleep(Duration::from_secs(5)).await;
    assert_eq!(tries.load(Ordering::Relaxed), 4, "one probe");
    assert_eq!(set.stats("down").unwrap().breaker(), BreakerState::Open);
    down.store(false, Ordering::Relaxed);
    sleep(Duration::from_secs(11)).await;
    let s = set.stats("down").unwrap();
    assert_eq!(s.breaker(), BreakerState::Closed);
    assert_eq!(s.breaker_opened(), 2);
    assert_eq!(s.held(), 0);
    assert_eq!(s.delivered(), s.accepted(), "every job waited it out");
    assert_eq!(s.failed(), 0);
}

/// Fails three times, then answers each attempt "slow down" (a 503 with
/// `Retry-After: 1`) until `hints` run out, then takes everything.
struct Recovering {
    tries: Arc<AtomicU32>,
    hints: u32,
}

#[async_trait]
impl Downstream<u32> for Recovering {
    async fn deliver(&self, _: &u32, _: Attempt) -> Delivery {
        match self.tries.fetch_add(1, Ordering::Relaxed) {
            0..3 => Delivery::Retry { after: None },
            n if n < 3 + self.hints => Delivery::Retry {
                after: Some(Duration::from_secs(1)),
            },
            _ => Delivery::Done,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_probe_answered_slow_down_closes_the_breaker_and_the_queue_drains() {
    let tries = Arc::new(AtomicU32::new(0));
    let t = tries.clone();
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(100.0)
            .capacity(50)
            .max_in_flight(1)
            .retries(
                RetryPolicy::new(10).backoff(Duration::from_millis(10), Duration::from_millis(10)),
            ),
    )
    .breaker(
        BreakerConfig::default()
            .trip_after(3)
            .cool_down(Duration::from_secs(5), Duration::from_secs(20)),
    )
    .build(move |_: &str| Recovering {
        tries: t.clone(),
        hints: 1,
    })
    .unwrap();
    for job in 0..10 {
        set.try_submit("rx", job).unwrap();
    }
    sleep(Duration::from_secs(1)).await;
    assert_eq!(set.stats("rx").unwrap().breaker(), BreakerState::Open);
    assert_eq!(tries.load(Ordering::Relaxed), 3);
    // The probe (after 5 s) is answered "slow down": the receiver lives,
    // the breaker closes, the queue drains and the probed job comes back
    // after its hint (before the fix the breaker stayed half-open, its
    // probe never counted as landed, and nothing was sent again).
    sleep(Duration::from_secs(6)).await;
    let s = set.stats("rx").unwrap();
    assert_eq!(s.breaker(), BreakerState::Closed, "a live receiver's hint");
    assert_eq!((s.held(), s.delivered(), s.failed()), (0, 10, 0));
    assert_eq!(
        tries.load(Ordering::Relaxed),
        3 + 1 + 10,
        "one probe, then each once"
    );
    assert_eq!(s.breaker_opened(), 1);
}

#[tokio::test(start_paused = true)]
async fn idle_destinations_hold_no_throttle_and_a_full_set_retires_the_idlest() {
    let (down, tries) = flags();
    let set = Destinations::builder(Throttle::builder().drain_rate(1_000.0))
        .max_destinations(3)
        .destination("named", DestinationConfig::default())
        .build(receivers(&down, &tries))
        .unwrap();
    set.try_submit("named", 0).unwrap();
    set.try_submit("a", 0).unwrap();
    assert_eq!(set.active(), 2);
    sleep(Duration::from_millis(10)).await;
    assert_eq!(set.stats("a").unwrap().delivered(), 1);
    assert_eq!(set.active(), 2, "delivered, and lingering for idle_after");
    set.try_submit("a", 1).unwrap();
    sleep(Duration::from_millis(10)).await;
    let a = set.stats("a").unwrap();
    assert_eq!(
        (a.delivered(), a.activations()),
        (2, 1),
        "a job while it lingers finds the same throttle"
    );
    sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        set.active(),
        0,
        "idle for idle_after: both throttles were handed back"
    );
    set.try_submit("b", 0).unwrap();
    assert_eq!(set.active(), 1);
    sleep(Duration::from_millis(1100)).await;
    assert_eq!(set.active(), 0);
    assert_eq!((set.len(), set.held()), (3, 0));

    set.try_submit("c", 0).unwrap();
    assert!(!set.contains("a"), "the idlest unnamed one made room");
    assert!(set.contains("named") && set.contains("b"));
    sleep(Duration::from_millis(100)).await;
    assert_eq!(set.stats("c").unwrap().delivered(), 1);

    // The only record is busy: a new destination is refused.
    let slow = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
        .max_destinations(1)
        .build(receivers(&down, &tries))
        .unwrap();
    slow.try_submit("x", 0).unwrap();
    slow.try_submit("x", 1).unwrap();
    let refused = slow.try_submit("y", 0).unwrap_err();
    assert_eq!(refused.reason(), Reason::Overloaded);
    assert!(matches!(
        slow.configure("z", DestinationConfig::default()),
        Err(DestinationError::Full { max: 1 })
    ));
}

/// Destinations that start at 50/s and adapt between 10/s and 100/s.
fn adaptive_set() -> Destinations<u32> {
    let (down, tries) = flags();
    let aimd = dripfeed::rate::AimdConfig::default()
        .with_floor(10.0)
        .with_ceiling(100.0)
        .build()
        .unwrap();
    Destinations::builder(Throttle::builder().adaptive(aimd).drain_rate(50.0))
        .build(receivers(&down, &tries))
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_destination_keeps_its_learned_rate_while_idle() {
    let set = adaptive_set();
    set.configure("a", DestinationConfig::default().rate(30.0).ceiling(40.0))
        .unwrap();
    assert_eq!(set.stats("a").unwrap().drain_rate(), 30.0);
    set.try_submit("a", 1).unwrap();
    let active = set.stats("a").unwrap();
    assert!(active.is_active());
    assert_eq!(active.drain_rate(), 30.0, "starts where configured");
    assert!(matches!(
        set.configure("a", DestinationConfig::default().rate(45.0)),
        Err(DestinationError::BeyondRing { ring_rate, .. }) if ring_rate == 40.0
    ));
    sleep(Duration::from_secs(2)).await;
    let idle = set.stats("a").unwrap();
    assert!(!idle.is_active());
    assert!((10.0..=40.0).contains(&idle.drain_rate()));
}

/// Every value of `name` in a snapshot, by its `destination` label.
fn series(recorder: &DebuggingRecorder, name: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        if key.key().name() != name {
            continue;
        }
        let dest = key
            .key()
            .labels()
            .find(|l| l.key() == "destination")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        let outcome = key.key().labels().find(|l| l.key() == "outcome");
        if outcome.is_some_and(|o| o.value() != "delivered") {
            continue;
        }
        let v = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(_) => continue,
        };
        out.push((dest, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test(start_paused = true)]
async fn named_destinations_have_their_own_series_and_the_rest_are_summed() {
    let (down, tries) = flags();
    let recorder = DebuggingRecorder::new();
    let set = metrics::with_local_recorder(&recorder, || {
        Destinations::builder(
            Throttle::builder()
                .name("hooks")
                .drain_rate(10.0)
                .capacity(100),
        )
        .destination("vip", DestinationConfig::default())
        .build(receivers(&down, &tries))
        .unwrap()
    });
    metrics::with_local_recorder(&recorder, || {
        for job in 0..3 {
            set.try_submit("vip", job).unwrap();
        }
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            for job in 0..=i as u32 {
                set.try_submit(name, job).unwrap();
            }
        }
    });
    // Queued, before the drains ran: each publishes its depth, and the
    // unnamed ones add up under _other (1+2+3+4), not the last one's 4.
    for d in ["vip", "a", "b", "c", "d"] {
        set.stats(d);
    }
    let depth = series(&recorder, dripfeed::metrics::QUEUE_DEPTH);
    assert_eq!(
        depth,
        vec![("_other".to_owned(), 10.0), ("vip".to_owned(), 3.0)]
    );

    sleep(Duration::from_secs(2)).await;
    let delivered = series(&recorder, dripfeed::metrics::JOBS);
    assert_eq!(
        delivered,
        vec![("_other".to_owned(), 10.0), ("vip".to_owned(), 3.0)],
        "one series per named destination, the rest summed"
    );
    let depth = series(&recorder, dripfeed::metrics::QUEUE_DEPTH);
    assert!(
        depth.iter().all(|(_, v)| *v == 0.0),
        "idle throttles took their gauges out: {depth:?}"
    );
}

/// The gauges `names` by destination, summed over every snapshot taken:
/// the debugging recorder hands each value out once (a snapshot resets it
/// to zero), and a set's series move only by increments, so the sum is
/// what a Prometheus page would show.
struct Shown<'a> {
    recorder: &'a DebuggingRecorder,
    names: [&'static str; 2],
    total: std::collections::HashMap<(&'static str, String), f64>,
}

impl Shown<'_> {
    /// `destination`'s values of the two gauges now.
    fn of(&mut self, destination: &str) -> (f64, f64) {
        for (key, _, _, value) in self.recorder.snapshotter().snapshot().into_vec() {
            let (Some(name), DebugValue::Gauge(v)) =
                (self.names.iter().find(|n| **n == key.key().name()), value)
            else {
                continue;
            };
            let dest = key
                .key()
                .labels()
                .find(|l| l.key() == "destination")
                .map(|l| l.value().to_owned())
                .unwrap_or_default();
            *self.total.entry((name, dest)).or_default() += v.into_inner();
        }
        let get = |n| {
            self.total
                .get(&(n, destination.to_owned()))
                .copied()
                .unwrap_or(0.0)
        };
        (get(self.names[0]), get(self.names[1]))
    }
}

/// A named destination shows its bound and the rate it would start at from
/// the start and while idle (a dashboard's `depth / capacity` never divides
/// by zero); while busy, its throttle's own values, not added to those; an
/// unnamed one shows them only while it has a throttle.
#[tokio::test(start_paused = true)]
async fn a_named_destination_shows_its_capacity_and_rate_while_idle() {
    use dripfeed::metrics::{DRAIN_RATE, QUEUE_CAPACITY};
    let (down, tries) = flags();
    let recorder = DebuggingRecorder::new();
    let set = metrics::with_local_recorder(&recorder, || {
        Destinations::builder(
            Throttle::builder()
                .name("hooks")
                .drain_rate(10.0)
                .latency_budget(Duration::from_secs(2)),
        )
        .destination("vip", DestinationConfig::default().rate(5.0))
        .build(receivers(&down, &tries))
        .unwrap()
    });
    let mut gauges = Shown {
        recorder: &recorder,
        names: [QUEUE_CAPACITY, DRAIN_RATE],
        total: Default::default(),
    };
    let mut shown = |d: &str| gauges.of(d);
    assert_eq!(shown("vip"), (10.0, 5.0), "from the start: 2 s × 5/s");
    let idle = set.stats("vip").unwrap();
    assert_eq!((idle.capacity(), idle.drain_rate()), (10, 5.0));

    metrics::with_local_recorder(&recorder, || {
        for job in 0..3 {
            set.try_submit("vip", job).unwrap();
        }
        set.try_submit("other", 9).unwrap();
    });
    set.stats("vip");
    set.stats("other");
    assert_eq!(shown("vip"), (10.0, 5.0), "its throttle's, not twice");
    assert_eq!(shown("_other"), (20.0, 10.0));

    sleep(Duration::from_secs(3)).await; // delivered, then idle
    assert!(!set.stats("vip").unwrap().is_active());
    assert_eq!(shown("vip"), (10.0, 5.0), "idle, as before");
    assert_eq!(
        shown("_other"),
        (0.0, 0.0),
        "an unnamed one shows nothing idle"
    );
    assert_eq!(set.stats("vip").unwrap().capacity(), 10);

    set.configure("vip", DestinationConfig::default().rate(8.0))
        .unwrap();
    assert_eq!(shown("vip"), (16.0, 8.0), "a new rate shows at once");
    set.remove("vip", Duration::ZERO).await.unwrap();
    assert_eq!(shown("vip"), (0.0, 0.0), "taken out of the set");
}

/// A named destination without its own series is summed into `_other`
/// (no resting gauges of its own), and turning its series on or off moves
/// them at once: the resting gauges, and the jobs of its next spell.
#[tokio::test(start_paused = true)]
async fn a_destination_without_its_own_series_is_summed_and_can_be_given_them() {
    use dripfeed::metrics::{DRAIN_RATE, QUEUE_CAPACITY};
    let (down, tries) = flags();
    let recorder = DebuggingRecorder::new();
    let set = metrics::with_local_recorder(&recorder, || {
        Destinations::builder(
            Throttle::builder()
                .name("hooks")
                .drain_rate(10.0)
                .latency_budget(Duration::from_secs(2)),
        )
        .destination(
            "quiet",
            DestinationConfig::default().rate(5.0).own_series(false),
        )
        .build(receivers(&down, &tries))
        .unwrap()
    });
    let mut gauges = Shown {
        recorder: &recorder,
        names: [QUEUE_CAPACITY, DRAIN_RATE],
        total: Default::default(),
    };
    assert_eq!(gauges.of("quiet"), (0.0, 0.0), "no series of its own");
    assert_eq!(
        gauges.of("_other"),
        (0.0, 0.0),
        "and none resting in _other"
    );
    assert!(
        set.stats("quiet").unwrap().is_named(),
        "still never retired"
    );
    metrics::with_local_recorder(&recorder, || {
        set.try_submit("quiet", 1).unwrap();
    });
    sleep(Duration::from_secs(3)).await;
    let delivered = series(&recorder, dripfeed::metrics::JOBS);
    assert_eq!(delivered, vec![("_other".to_owned(), 1.0)]);

    metrics::with_local_recorder(&recorder, || {
        set.configure("quiet", DestinationConfig::default().rate(5.0))
            .unwrap();
    });
    assert_eq!(gauges.of("quiet"), (10.0, 5.0), "its own from now on");
    metrics::with_local_recorder(&recorder, || {
        set.try_submit("quiet", 2).unwrap();
    });
    sleep(Duration::from_secs(3)).await;
    let delivered: Vec<_> = series(&recorder, dripfeed::metrics::JOBS)
        .into_iter()
        .filter(|(_, n)| *n > 0.0) // a snapshot hands each count out once
        .collect();
    assert_eq!(delivered, vec![("quiet".to_owned(), 1.0)]);
    metrics::with_local_recorder(&recorder, || {
        set.configure(
            "quiet",
            DestinationConfig::default().rate(5.0).own_series(false),
        )
        .unwrap();
    });
    assert_eq!(gauges.of("quiet"), (0.0, 0.0), "taken back out");
}

#[tokio::test(start_paused = true)]
async fn an_active_destination_takes_new_limits_at_once_within_its_ring() {
    let (down, tries) = flags();
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(10.0)
            .max_rate(100.0)
            .latency_budget(Duration::from_secs(1)),
    )
    .destination(
        "dead",
        DestinationConfig::default().rate(10.0).ceiling(20.0),
    )
    .build(receivers(&down, &tries))
    .unwrap();
    set.try_submit("dead", 1).unwrap(); // never answered: it stays active
    let capacity = || set.stats("dead").unwrap().capacity();
    assert_eq!(capacity(), 10, "1 s × 10/s (its ring holds 1 s × 20/s)");

    let cfg = DestinationConfig::default().rate(10.0).ceiling(20.0);
    set.configure("dead", cfg.budget(Duration::from_millis(500)))
        .unwrap();
    assert_eq!(capacity(), 5, "a shorter budget lowers the bound at once");

    let too_long = set.configure("dead", cfg.budget(Duration::from_secs(3)));
    assert!(
        matches!(too_long, Err(DestinationError::BeyondRing { rate, ring_rate })
            if rate == 20.0 && (ring_rate - 20.0 / 3.0).abs() < 1e-9),
        "{too_long:?}"
    );
    assert_eq!(capacity(), 5, "refused: nothing changed");

    let slower = DestinationConfig::default().rate(5.0).ceiling(10.0);
    set.configure("dead", slower.budget(Duration::from_secs(2)))
        .unwrap();
    let s = set.stats("dead").unwrap();
    assert_eq!(
        (s.drain_rate(), s.capacity()),
        (5.0, 10),
        "2 s × 10/s fits its ring"
    );

    let higher = set.configure("dead", DestinationConfig::default().ceiling(30.0));
    assert!(
        matches!(higher, Err(DestinationError::BeyondRing { ring_rate, .. }) if ring_rate == 20.0),
        "{higher:?}"
    );
    assert_eq!(set.stats("dead").unwrap().drain_rate(), 5.0);
}

#[tokio::test(start_paused = true)]
async fn a_lowered_ceiling_caps_an_active_destinations_aimd() {
    let set = adaptive_set();
    let mut highest_after = 0.0f64;
    let mut highest_before = 0.0f64;
    for tick in 0..200 {
        for job in 0..10 {
            let _ = set.try_submit("a", job); // 200/s offered, healthy receiver
        }
        if tick == 40 {
            set.configure("a", DestinationConfig::default().ceiling(20.0))
                .unwrap();
        }
        let rate = set.stats("a").unwrap().drain_rate();
        if tick < 40 {
            highest_before = highest_before.max(rate);
        } else {
            highest_after = highest_after.max(rate);
        }
        sleep(Duration::from_millis(50)).await;
    }
    assert!(
        highest_before > 20.0,
        "AIMD ran above 20/s first: {highest_before}"
    );
    assert!(
        highest_after <= 20.0,
        "and never again once capped: {highest_after}"
    );
    assert!(set.stats("a").unwrap().is_active());
}

#[tokio::test(start_paused = true)]
async fn a_template_setting_a_set_cannot_share_is_refused_with_what_to_use() {
    use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    let quota = Quota::per_second(1.0).burst(2.0).unwrap();
    let (down, tries) = flags();
    let local = Destinations::builder(Throttle::builder().drain_rate(10.0).per_key(100, quota))
        .build(receivers(&down, &tries));
    let Err(e) = local else {
        panic!("a per-key table per destination was accepted");
    };
    assert!(matches!(
        e,
        DestinationError::Template {
            what: "per_key",
            ..
        }
    ));
    assert!(e.to_string().contains("key_store"), "{e}");

    // The shared store is the way: one quota whichever destination.
    let store: Arc<dyn BucketStore> = Arc::new(KeyedBuckets::<String>::new(100, quota).unwrap());
    let set = Destinations::builder(Throttle::builder().drain_rate(10.0).key_store(store))
        .build(receivers(&down, &tries))
        .unwrap();
    assert!(
        set.submit_timeout(
            "a",
            dripfeed::Submission::new(1).key("acme", 1.0),
            std::time::Duration::ZERO
        )
        .await
        .is_ok()
    );
    assert!(
        set.submit_timeout(
            "b",
            dripfeed::Submission::new(2).key("acme", 1.0),
            std::time::Duration::ZERO
        )
        .await
        .is_ok()
    );
    let over = set
        .submit_timeout(
            "b",
            dripfeed::Submission::new(3).key("acme", 1.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!(over.reason(), Reason::OverQuota);
    let b = set.stats("b").unwrap();
    assert_eq!((b.accepted(), b.refused()), (1, 1));
}

/// Lingering destinations give their delivery places back: with a shared
/// budget of 4 places and 200 destinations each given one job at once,
/// every job is delivered and every destination goes idle.
#[tokio::test(start_paused = true)]
async fn lingering_destinations_hold_no_delivery_place() {
    let (down, tries) = flags();
    let set = Destinations::builder(Throttle::builder().drain_rate(100.0).max_in_flight(1))
        .max_in_flight(4)
        .build(receivers(&down, &tries))
        .unwrap();
    for d in 0..200 {
        set.try_submit(&format!("d{d}"), d).unwrap();
    }
    sleep(Duration::from_secs(3)).await;
    let delivered: u64 = set.all_stats().iter().map(|s| s.delivered()).sum();
    assert_eq!(delivered, 200);
    assert_eq!((set.active(), set.held()), (0, 0));
}

/// One scheduler for many drains: 1,000 destinations at 1/s and 10 at
/// 1,000/s, all driven by two tasks, are each paced at their own rate
/// (within one emission over 10 s: 0.1 % at 1,000/s).
#[tokio::test(start_paused = true)]
async fn two_drivers_pace_a_thousand_slow_destinations_and_ten_fast_ones() {
    let set = Destinations::builder(
        Throttle::builder()
            .drain_rate(1.0)
            .max_rate(1000.0)
            .latency_budget(Duration::from_secs(12))
            .max_in_flight(64),
    )
    .max_in_flight(100_000)
    .max_destinations(2_000)
    .drivers(2)
    .build(|_: &str| |_: &u32, _| async { Delivery::Done })
    .unwrap();
    for d in 0..1_000 {
        let name = format!("slow{d}");
        set.define(&name, DestinationConfig::default().rate(1.0))
            .unwrap();
        for job in 0..12 {
            set.try_submit(&name, job).unwrap();
        }
    }
    for d in 0..10 {
        let name = format!("fast{d}");
        set.define(&name, DestinationConfig::default().rate(1000.0))
            .unwrap();
        for job in 0..11_000 {
            set.try_submit(&name, job).unwrap();
        }
    }
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert!(
        tasks <= 3,
        "two drivers, not a task per destination: {tasks}"
    );
    sleep(Duration::from_secs(10)).await;
    for d in 0..1_000 {
        let n = set.stats(&format!("slow{d}")).unwrap().delivered();
        assert!((10..=11).contains(&n), "slow{d}: {n} in 10 s at 1/s");
    }
    for d in 0..10 {
        let n = set.stats(&format!("fast{d}")).unwrap().delivered();
        assert!(
            (10_000..=10_001).contains(&n),
            "fast{d}: {n} in 10 s at 1000/s"
        );
    }
}

/// A destination's next throttle goes on from what its deliveries took
/// before it went idle: closing, it starts none that would outlast the
/// grace (a fresh estimate started every delivery again, each cut off at
/// the deadline and sent twice after a restart).
#[tokio::test(start_paused = true)]
async fn what_deliveries_take_outlives_a_destinations_idle_spell() {
    let started = Arc::new(AtomicU32::new(0));
    let set = {
        let started = started.clone();
        Destinations::builder(Throttle::builder().drain_rate(10.0).max_in_flight(8)).build(
            move |_name: &str| {
                let started = started.clone();
                move |_: &u32, _| {
                    started.fetch_add(1, Ordering::Relaxed);
                    async {
                        sleep(Duration::from_millis(1500)).await;
                        Delivery::Done
                    }
                }
            },
        )
    }
    .unwrap();
    set.try_submit("slow", 0).unwrap();
    sleep(Duration::from_secs(4)).await; // delivered, then idle: no throttle
    assert_eq!(set.active(), 0);
    for job in 1..=10 {
        set.try_submit("slow", job).unwrap();
    }
    let (stats, returned) = set.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        started.load(Ordering::Relaxed),
        1,
        "none started that would outlast 1 s"
    );
    assert_eq!(returned.len(), 10);
    assert_eq!(stats[0].delivered(), 1);
}
