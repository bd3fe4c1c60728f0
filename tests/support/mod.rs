//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub(crate) mod conformance;
#[cfg(feature = "redis")]
pub(crate) mod fleet;
pub(crate) mod fragile;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod redis;
pub(crate) mod sim;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dripfeed::{Attempt, Delivery, Downstream};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::Instant;

/// A downstream that records each job with the instant it was delivered.
#[derive(Clone, Default)]
pub(crate) struct Recorder<J> {
    pub seen: Arc<Mutex<Vec<(J, Instant)>>>,
}

impl<J: Clone + Send + Sync + 'static> Recorder<J> {
    pub(crate) fn new() -> Self {
        Recorder {
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub(crate) fn jobs(&self) -> Vec<J> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(j, _)| j.clone())
            .collect()
    }

    pub(crate) fn times(&self) -> Vec<Instant> {
        self.seen.lock().unwrap().iter().map(|(_, t)| *t).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl<J: Clone + Send + Sync + 'static> Downstream<J> for Recorder<J> {
    async fn deliver(&self, job: &J, _attempt: Attempt) -> Delivery {
        self.seen
            .lock()
            .unwrap()
            .push((job.clone(), Instant::now()));
        Delivery::Done
    }
}

/// A downstream that answers `Done`, except its call number `nth` (from 0),
/// which asks to slow down for `hint` (a 429 or 503 with `Retry-After`);
/// with the count of calls so far.
pub(crate) fn slows_down_once(
    nth: u32,
    hint: std::time::Duration,
) -> (impl Downstream<u32>, Arc<std::sync::atomic::AtomicU32>) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let downstream = move |_: &u32, _: Attempt| {
        let n = c.fetch_add(1, Ordering::Relaxed);
        async move {
            if n == nth {
                Delivery::Retry { after: Some(hint) }
            } else {
                Delivery::Done
            }
        }
    };
    (downstream, calls)
}

/// An adaptive throttle (floor 10/s, starting at 40/s) with 10,000 jobs
/// queued, whose downstream asks to slow down for `hint` on its 31st call;
/// with the count of calls so far. Its drain task is spawned.
pub(crate) fn hinted_throttle(
    hint: std::time::Duration,
) -> (dripfeed::Throttle<u32>, Arc<std::sync::atomic::AtomicU32>) {
    let (downstream, calls) = slows_down_once(30, hint);
    let aimd = dripfeed::rate::AimdConfig::default()
        .with_floor(10.0)
        .build()
        .unwrap();
    let (throttle, _drain) = dripfeed::Throttle::builder()
        .adaptive(aimd)
        .drain_rate(40.0)
        .capacity(10_000)
        .build(downstream)
        .unwrap();
    for i in 0..10_000 {
        let _ = throttle.try_submit(i);
    }
    (throttle, calls)
}

/// Waits, at most `limit`, until `done()` holds, checking again each time
/// `changed` is notified (`notify_waiters`); `false` if the limit passed.
/// For real-time tests that wait for an event, never for a time.
pub(crate) async fn until(
    changed: &tokio::sync::Notify,
    limit: std::time::Duration,
    done: impl Fn() -> bool,
) -> bool {
    let wait = async {
        loop {
            let more = changed.notified();
            if done() {
                return;
            }
            more.await;
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

/// Polls `done` every 10 ms, in real time, for at most `limit`; whether it
/// came to hold. For state kept by a thread the test cannot await (the
/// journal's writer).
pub(crate) async fn until_true(limit: std::time::Duration, done: impl Fn() -> bool) -> bool {
    let wait = async {
        while !done() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

/// Lets spawned tasks run without moving paused time.
pub(crate) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Every counter's value, keyed `name{label values}` without the `throttle`
/// label, from one snapshot (a snapshot drains what it reports).
pub(crate) fn counters(recorder: &DebuggingRecorder) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        if let DebugValue::Counter(v) = value {
            let labels: Vec<String> = key
                .key()
                .labels()
                .filter(|l| l.key() != "throttle")
                .map(|l| l.value().to_string())
                .collect();
            let name = format!("{}{{{}}}", key.key().name(), labels.join(","));
            *out.entry(name).or_default() += v;
        }
    }
    out
}

/// A shared store's failures for the handle labelled `throttle = label` (a
/// key prefix or a table): errors counted since the last snapshot (the
/// debugging recorder resets counters on each) and the fallback gauge.
pub(crate) fn global_metrics(recorder: &DebuggingRecorder, label: &str) -> (u64, Option<f64>) {
    let (mut errors, mut fallback) = (0, None);
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let ours = key
            .key()
            .labels()
            .any(|l| l.key() == "throttle" && l.value() == label);
        match (key.key().name(), value) {
            (dripfeed::metrics::GLOBAL_ERRORS, DebugValue::Counter(n)) if ours => errors += n,
            (dripfeed::metrics::GLOBAL_FALLBACK, DebugValue::Gauge(g)) if ours => {
                fallback = Some(g.into_inner())
            }
            _ => {}
        }
    }
    (errors, fallback)
}

/// Runs the test `name` (its path in this binary, `module::test`) in a
/// process of its own, for a test that measures the whole process (its
/// resident memory): in this binary other tests run beside it. In that
/// child it returns `true` (run the body); in the test runner's process it
/// starts the child, asserts that the test ran there and passed, and
/// returns `false`.
pub(crate) fn in_own_process(name: &str) -> bool {
    const VAR: &str = "DRIPFEED_TEST_ALONE";
    if std::env::var(VAR).is_ok_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args(["--exact", name, "--test-threads", "1", "--nocapture"])
        .env(VAR, name)
        .output()
        .expect("running the test in a process of its own");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name}, in a process of its own:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}
