//! A fleet of nodes, each on its own tokio runtime in its own thread,
//! sharing one `RedisRate`; each flooded by its own producer. A node is a
//! destinations set (as the relay runs) whose template takes the fleet's
//! permits, with two destinations: the fleet's rate caps their sum. Real
//! time.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use dripfeed::destinations::{DestinationConfig, Destinations};
use dripfeed::global::{Failure, RedisConnection, RedisRate};
use dripfeed::{Delivery, Throttle};

/// Where the shared bucket lives.
#[derive(Clone)]
pub(crate) enum Target {
    Single(String),
    Cluster(Vec<String>),
}

/// What a node reports when stopped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    pub accepted: u64,
    pub delivered: u64,
    pub returned: u64,
    pub dead_lettered: u64,
    pub downstream_saw: u64,
    pub round_trips: u64,
    pub errors: u64,
}

/// One running node.
pub(crate) struct Node {
    pub delivered: Arc<AtomicU64>,
    pub rate: RedisRate,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Report>>,
}

/// Node settings.
#[derive(Clone)]
pub(crate) struct NodeConfig {
    pub target: Target,
    pub key: String,
    pub global_rate: f64,
    pub local_rate: f64,
    pub failure: Failure,
}

impl Node {
    pub(crate) fn start(cfg: NodeConfig, name: String) -> Node {
        let delivered = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let (d, s) = (delivered.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(run_node(cfg, name, d, s, tx))
        });
        let rate = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("node started");
        Node {
            delivered,
            rate,
            stop,
            handle: Some(handle),
        }
    }

    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    pub(crate) fn stop(mut self) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().expect("node thread")
    }
}

async fn run_node(
    cfg: NodeConfig,
    name: String,
    delivered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<RedisRate>,
) -> Report {
    let conn = match &cfg.target {
        Target::Single(url) => RedisConnection::open(url).unwrap(),
        Target::Cluster(urls) => {
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            RedisConnection::cluster(&urls).await.unwrap()
        }
    };
    let rate = RedisRate::builder(conn, cfg.key.clone(), cfg.global_rate)
        .name(name.clone())
        .on_failure(cfg.failure)
        .start()
        .unwrap();
    tx.send(rate.clone()).unwrap();
    let seen = delivered.clone();
    let template = Throttle::builder()
        .name(name)
        .drain_rate(cfg.local_rate)
        .capacity(100)
        .permits(rate.clone());
    let set = Destinations::builder(template)
        .destination("a", DestinationConfig::default())
        .destination("b", DestinationConfig::default())
        .build(move |_: &str| {
            let seen = seen.clone();
            move |_: &u64, _| {
                seen.fetch_add(1, Ordering::Relaxed);
                async { Delivery::Done }
            }
        })
        .unwrap();
    let mut accepted = 0u64;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for dest in ["a", "b"] {
            while set.try_submit(dest, n).is_ok() {
                accepted += 1;
                n += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (stats, returned) = set.shutdown(Duration::ZERO).await;
    Report {
        accepted,
        delivered: stats.iter().map(|s| s.delivered()).sum(),
        returned: returned.len() as u64,
        dead_lettered: stats.iter().map(|s| s.dead_lettered()).sum(),
        downstream_saw: delivered.load(Ordering::Relaxed),
        round_trips: rate.round_trips(),
        errors: rate.errors(),
    }
}

/// Total delivered by all nodes.
pub(crate) fn total(nodes: &[Node]) -> u64 {
    nodes.iter().map(Node::delivered).sum()
}

/// Deliveries over `window`, measured in real time.
pub(crate) fn measure(nodes: &[Node], window: Duration) -> (u64, Vec<u64>, Duration) {
    let before: Vec<u64> = nodes.iter().map(Node::delivered).collect();
    let start = std::time::Instant::now();
    std::thread::sleep(window);
    let after: Vec<u64> = nodes.iter().map(Node::delivered).collect();
    let took = start.elapsed();
    let each: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    (each.iter().sum(), each, took)
}

/// Polls `cond` every 5 ms up to `limit`; the time it took, if it held.
pub(crate) fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = std::time::Instant::now();
    while start.elapsed() <= limit {
        if cond() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Checks a stopped node lost nothing it accepted.
pub(crate) fn assert_nothing_lost(r: &Report) {
    assert_eq!(
        r.accepted,
        r.delivered + r.returned + r.dead_lettered,
        "every accepted job accounted for: {r:?}"
    );
    assert_eq!(r.delivered, r.downstream_saw, "{r:?}");
}

/// The fleet tests' global rate.
pub(crate) const GLOBAL: f64 = 300.0;

/// Three flooded nodes with a local pace of 1000/s sharing `GLOBAL`.
pub(crate) fn fleet(target: Target, key: &str, failure: Failure) -> Vec<Node> {
    (0..3)
        .map(|i| {
            Node::start(
                NodeConfig {
                    target: target.clone(),
                    key: key.to_owned(),
                    global_rate: GLOBAL,
                    local_rate: 1000.0,
                    failure,
                },
                format!("node{i}"),
            )
        })
        .collect()
}

/// Runs the 10 s aggregate check; returns (aggregate rate, round trips per 1,000 jobs).
pub(crate) fn aggregate_check(target: Target, key: &str) -> (f64, f64) {
    let nodes = fleet(target, key, Failure::FailClosed);
    std::thread::sleep(Duration::from_secs(1)); // warm up
    let (n, each, took) = measure(&nodes, Duration::from_secs(10));
    let rate = n as f64 / took.as_secs_f64();
    let reports: Vec<_> = nodes.into_iter().map(Node::stop).collect();
    let trips: u64 = reports.iter().map(|r| r.round_trips).sum();
    let delivered: u64 = reports.iter().map(|r| r.delivered).sum();
    let per_1000 = trips as f64 * 1000.0 / delivered.max(1) as f64;
    eprintln!(
        "fleet: {n} jobs in {took:?} = {rate:.1}/s (each {each:?}); \
         {trips} round trips for {delivered} jobs = {per_1000:.1} per 1,000"
    );
    for r in &reports {
        assert_nothing_lost(r);
        assert_eq!(r.errors, 0);
    }
    assert!(
        (rate - GLOBAL).abs() <= GLOBAL * 0.02,
        "aggregate {rate:.1}/s not within 2 % of {GLOBAL}"
    );
    for e in each {
        assert!(e > 500, "every node gets a share: {e}");
    }
    assert!(per_1000 < 1000.0, "far below one round trip per job");
    (rate, per_1000)
}
