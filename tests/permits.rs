//! A shared permit source caps emission below the local rate; shutdown
//! still ends on time while the drain waits for permits.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dripfeed::{Outcome, Throttle};
use dripfeed::{Permit, PermitSource};
use support::Recorder;
use tokio::sync::Notify;
use tokio::time::{Instant, sleep};

/// Ten permits a second, refilled by a background task.
struct TenPerSecond {
    pool: AtomicU32,
    refilled: Notify,
    rates: std::sync::Mutex<Vec<f64>>,
}

#[async_trait::async_trait]
impl PermitSource for TenPerSecond {
    fn try_take(&self) -> Option<Permit<'_>> {
        self.pool
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()
            .map(|_| Permit::new(self))
    }
    fn give_back(&self) {
        self.pool.fetch_add(1, Ordering::AcqRel);
    }
    async fn ready(&self) {
        self.refilled.notified().await;
    }
    fn set_local_rate(&self, rate: f64) {
        self.rates.lock().unwrap().push(rate);
    }
}

#[tokio::test(start_paused = true)]
async fn the_shared_source_caps_the_rate_and_shutdown_still_ends() {
    let source = Arc::new(TenPerSecond {
        pool: AtomicU32::new(10),
        refilled: Notify::new(),
        rates: Default::default(),
    });
    let refill = source.clone();
    tokio::spawn(async move {
        loop {
            sleep(Duration::from_secs(1)).await;
            refill.pool.store(10, Ordering::Release);
            refill.refilled.notify_waiters();
        }
    });
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .max_rate(200.0)
        .capacity(1000)
        .permits(source.clone())
        .build(rec.clone())
        .unwrap();
    for i in 0..100u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_millis(3500)).await;
    assert_eq!(rec.len(), 40, "10 at once, then 10 per refill");
    throttle.set_drain_rate(150.0).unwrap();
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_millis(1200)).await;
    assert!(
        start.elapsed() <= Duration::from_millis(1300),
        "no hang waiting for permits"
    );
    assert_eq!(report.stats.delivered(), 50);
    assert_eq!(report.stats.outcome(Outcome::Returned), 50);
    assert_eq!(
        *source.rates.lock().unwrap(),
        vec![100.0, 150.0],
        "told the local rate"
    );
}
