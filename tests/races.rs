//! Races between producers and the drain, on real threads: bounded in count
//! and time, asserting counts, never timings. Each job carries its id from
//! admission to its one end.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::{Attempt, Delivery, Outcome, Overflow, Reason, Slots, Throttle};
use tokio::time::timeout;

/// Ids seen by a downstream, and how many were seen twice.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<(HashSet<u64>, u64)>>);

impl Seen {
    fn add(&self, id: u64) {
        let mut s = self.0.lock().unwrap();
        if !s.0.insert(id) {
            s.1 += 1;
        }
    }
    fn ids(&self) -> HashSet<u64> {
        self.0.lock().unwrap().0.clone()
    }
    fn twice(&self) -> u64 {
        self.0.lock().unwrap().1
    }

    /// A downstream that records the id of every job it is handed.
    fn downstream(
        &self,
    ) -> impl Fn(&u64, Attempt) -> std::future::Ready<Delivery> + Send + Sync + 'static {
        let seen = self.clone();
        move |_: &u64, a: Attempt| {
            seen.add(a.id());
            std::future::ready(Delivery::Done)
        }
    }
}

/// Producers on three threads race `shutdown`: every job they were told is
/// admitted is delivered or handed back, each once; every other is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_against_shutdown() {
    let seen = Seen::default();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(200_000.0)
        .capacity(256)
        .build(seen.downstream())
        .unwrap();
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let t = throttle.clone();
            std::thread::spawn(move || {
                let (mut ids, mut refused) = (Vec::new(), 0u64);
                for i in 0..200_000u64 {
                    match t.try_submit(i) {
                        Ok(a) => ids.push(a.id()),
                        Err(r) if r.reason() == Reason::Closed => {
                            refused += 1;
                            break;
                        }
                        Err(_) => refused += 1,
                    }
                }
                (ids, refused)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = timeout(
        Duration::from_secs(30),
        throttle.shutdown(Duration::from_millis(5)),
    )
    .await
    .expect("shutdown ends");
    let (mut admitted, mut refused) = (HashSet::new(), 0);
    for p in producers {
        let (ids, r) = p.join().unwrap();
        admitted.extend(ids);
        refused += r;
    }
    let stats = throttle.stats();
    assert_eq!(seen.twice(), 0, "no job delivered twice");
    assert_eq!(seen.ids().len() as u64, stats.delivered());
    assert!(
        seen.ids().is_subset(&admitted),
        "only admitted ids delivered"
    );
    assert_eq!(
        stats.delivered() + report.returned.len() as u64,
        admitted.len() as u64,
        "every admitted job delivered or handed back"
    );
    assert_eq!(stats.outcome(Outcome::Refused), refused);
    assert_eq!(stats.submitted(), admitted.len() as u64 + refused);
    assert_eq!((stats.depth(), stats.in_flight()), (0, 0));
}

/// Head-drop producers evict while the drain pops: each admitted job is
/// delivered, evicted or handed back, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_drop_against_the_drains_pop() {
    let seen = Seen::default();
    let evicted = Arc::new(AtomicU64::new(0));
    let e = evicted.clone();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100_000.0)
        .capacity(8)
        .overflow(Overflow::HeadDrop)
        .on_evicted(move |_: u64| {
            e.fetch_add(1, Ordering::Relaxed);
        })
        .build(seen.downstream())
        .unwrap();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let t = throttle.clone();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                for i in 0..100_000u64 {
                    if t.try_submit(i).is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let admitted: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
    let report = throttle.shutdown(Duration::from_secs(5)).await;
    let stats = report.stats;
    assert_eq!(seen.twice(), 0);
    assert_eq!(
        stats.outcome(Outcome::Evicted),
        evicted.load(Ordering::Relaxed)
    );
    assert_eq!(
        stats.delivered() + stats.outcome(Outcome::Evicted) + report.returned.len() as u64,
        admitted,
        "each admitted job in one place"
    );
    assert_eq!(stats.submitted(), 200_000, "head-drop refuses nobody here");
    assert_eq!(stats.depth(), 0);
}

/// `Slots` callers give up at random instants while the drain claims them:
/// each waiter is granted or withdrawn, never both, never lost (callers
/// refused at once when the queue is full, so each is submitted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_withdrawals_against_the_drains_claim() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(50_000.0)
        .capacity(64)
        .build_slots()
        .unwrap();
    let tasks: Vec<_> = (0..4_000u64)
        .map(|i| {
            let slots = slots.clone();
            tokio::spawn(async move {
                let patience = Duration::from_micros(fastrand::u64(0..400) + i % 3);
                match timeout(patience, slots.try_acquire()).await {
                    Ok(Ok(slot)) => {
                        slot.report(Delivery::Done);
                        1
                    }
                    _ => 0,
                }
            })
        })
        .collect();
    let mut granted = 0;
    for t in tasks {
        granted += t.await.unwrap();
    }
    let stats = slots.shutdown(Duration::from_secs(5)).await;
    // A waiter claimed by the drain just as its caller gave up is granted
    // to nobody, but counted delivered: the slot was spent.
    assert!(stats.delivered() >= granted);
    assert_eq!(stats.submitted(), 4_000);
    assert_eq!(
        stats.delivered() + stats.outcome(Outcome::Cancelled) + stats.outcome(Outcome::Refused),
        4_000,
        "granted, withdrawn or refused: each waiter once"
    );
    assert_eq!(stats.depth(), 0);
}

/// Keyed refusals on one thread never take a place another thread needs:
/// with the drain paused, exactly `capacity` plain submits fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_refusals_hold_no_place() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(100)
        .per_key(16, Quota::per_second(1.0).burst(1.0).unwrap())
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    throttle.pause();
    let stop = Arc::new(AtomicBool::new(false));
    let refuser = {
        let (t, stop) = (throttle.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 10_000_000 {
                assert!(
                    t.try_submit(dripfeed::Submission::new(0).key("k", 2.0))
                        .is_err()
                );
                n += 1;
            }
        })
    };
    let mut ok = 0;
    for i in 0..100 {
        match throttle.try_submit(i) {
            Ok(_) => ok += 1,
            Err(r) => panic!("submit {i} refused as {:?} with room", r.reason()),
        }
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    refuser.join().unwrap();
    assert_eq!(ok, 100);
    assert_eq!(throttle.stats().rejected(Reason::Overloaded), 0);
    assert_eq!(
        throttle.try_submit(100).unwrap_err().reason(),
        Reason::Overloaded
    );
}

/// Many `submit`s wait for room in a queue of two places, from tasks on two
/// worker threads: each is admitted, each job delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_submits_all_get_in() {
    let seen = Seen::default();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(50_000.0)
        .capacity(2)
        .build(seen.downstream())
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|p| {
            let t = throttle.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..500u64 {
                    let admitted = timeout(Duration::from_secs(5), t.submit(p * 1000 + i))
                        .await
                        .expect("room within 5 s")
                        .expect("admitted");
                    ids.push(admitted.id());
                }
                ids
            })
        })
        .collect();
    let mut admitted = HashSet::new();
    for t in tasks {
        admitted.extend(t.await.unwrap());
    }
    assert_eq!(admitted.len(), 4_000, "ids are unique");
    let report = throttle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.delivered(), 4_000);
    assert_eq!(seen.ids(), admitted);
    assert_eq!(seen.twice(), 0);
}

/// Producers on 4 threads against destinations going idle and retiring
/// their throttles: a job that meets a retiring throttle goes to the next
/// one, and every accepted job is delivered exactly once, by one drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_going_idle_against_producers() {
    use dripfeed::destinations::Destinations;
    let seen = Seen::default();
    let log = seen.clone();
    let set = Destinations::builder(Throttle::builder().drain_rate(1_000_000.0).capacity(64))
        .max_in_flight(64)
        .idle_after(Duration::ZERO) // hand throttles back at once: the race
        .build(move |_: &str| {
            let log = log.clone();
            move |_: &u64, a: Attempt| {
                log.add(a.id());
                async { Delivery::Done }
            }
        })
        .unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let mut producers = Vec::new();
    for p in 0..4u64 {
        let (set, accepted) = (set.clone(), accepted.clone());
        let runtime = tokio::runtime::Handle::current();
        producers.push(std::thread::spawn(move || {
            let _guard = runtime.enter();
            for i in 0..5_000u64 {
                // Few jobs per destination at a time: each one idles often.
                let dest = format!("d{}", (i + p) % 8);
                if set.try_submit(&dest, i).is_ok() {
                    accepted.fetch_add(1, Ordering::Relaxed);
                }
                if i % 16 == 0 {
                    std::thread::yield_now();
                }
            }
        }));
    }
    for p in producers {
        p.join().unwrap();
    }
    let accepted = accepted.load(Ordering::Relaxed);
    let (stats, returned) = timeout(
        Duration::from_secs(30),
        set.shutdown(Duration::from_secs(10)),
    )
    .await
    .expect("shutdown in 30 s");
    assert!(returned.is_empty());
    let delivered: u64 = stats.iter().map(|s| s.delivered()).sum();
    let refused: u64 = stats.iter().map(|s| s.refused()).sum();
    assert_eq!(delivered, accepted, "every accepted job delivered");
    assert_eq!(accepted + refused, 20_000, "every job ended in one place");
    assert_eq!(seen.ids().len() as u64, accepted);
    assert_eq!(seen.twice(), 0, "no job delivered by two drains");
    assert_eq!(set.held(), 0);
    assert!(accepted >= 1_000, "enough got in to race: {accepted}");
    let activations: u64 = stats.iter().map(|s| s.activations()).sum();
    eprintln!("accepted {accepted}, throttles made for 8 destinations {activations}");
    assert!(activations > 8, "destinations went idle and came back");
}
