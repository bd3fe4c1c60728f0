//! A fleet of N throttles (each on its own tokio runtime, as separate
//! processes would be) sending to one counting receiver: first each with a
//! local limit of R/s (the aggregate drifts to N × R), then sharing one
//! limit of R/s through Redis (the aggregate is R).
//!
//! ```text
//! cargo run --release --features redis --example fleet -- --nodes 3 --rate 200
//! cargo run --release --features redis --example fleet -- --redis redis://127.0.0.1:6379/
//! ```
//! Without `--redis` it starts its own `redis-server` on a free port.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use dripfeed::global::{RedisConnection, RedisRate};
use dripfeed::{Delivery, Throttle};

#[derive(Parser, Debug)]
struct Args {
    /// Throttles in the fleet.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The limit, jobs per second (per node locally; for the fleet in Redis).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds measured per phase.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Redis URL; without it a redis-server is started on a free port.
    #[arg(long)]
    redis: Option<String>,
}

/// A redis-server child, killed on drop.
struct OwnServer(Child);

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> Result<(String, OwnServer), Box<dyn std::error::Error>> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server ({e}); pass --redis URL"))?;
    let server = OwnServer(child);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(5) {
            return Err("redis-server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((format!("redis://127.0.0.1:{port}/"), server))
}

/// Runs one node until `stop`, flooding its throttle; `redis` shares the limit.
fn node(rate: f64, redis: Option<String>, received: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("no runtime");
        return;
    };
    rt.block_on(async move {
        let mut builder = Throttle::builder().capacity(500);
        let mut fleet = None;
        match redis {
            Some(url) => {
                let shared = RedisConnection::open(&url)
                    .map_err(|e| e.to_string())
                    .and_then(|c| {
                        RedisRate::builder(c, "fleet-example", rate)
                            .start()
                            .map_err(|e| e.to_string())
                    });
                match shared {
                    Ok(shared) => {
                        // The local pace may be well above the fleet's limit.
                        builder = builder.drain_rate(rate * 4.0).permits(shared.clone());
                        fleet = Some(shared);
                    }
                    Err(e) => return eprintln!("redis: {e}"),
                }
            }
            None => builder = builder.drain_rate(rate),
        }
        let built = builder.build(move |_: &u64, _| {
            received.fetch_add(1, Ordering::Relaxed);
            async { Delivery::Done }
        });
        let (throttle, _drain) = match built {
            Ok(t) => t,
            Err(e) => return eprintln!("build: {e}"),
        };
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            while throttle.try_submit(n).is_ok() {
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Some(f) = fleet {
            let done = throttle.stats().delivered().max(1);
            println!(
                "  node: {} round trips for {done} jobs ({:.1} per 1,000)",
                f.round_trips(),
                f.round_trips() as f64 * 1000.0 / done as f64
            );
        }
        throttle.shutdown(Duration::ZERO).await;
    });
}

/// Runs the fleet for one phase; returns the receiver's rate.
fn phase(args: &Args, redis: Option<&str>) -> f64 {
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..args.nodes)
        .map(|_| {
            let (r, s, url) = (received.clone(), stop.clone(), redis.map(str::to_owned));
            let rate = args.rate;
            std::thread::spawn(move || node(rate, url, r, s))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1)); // warm up
    let (before, start) = (received.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(args.seconds));
    let got = received.load(Ordering::Relaxed) - before;
    let took = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    got as f64 / took
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.nodes == 0 || !(args.rate.is_finite() && args.rate > 0.0) {
        return Err("--nodes and --rate must be positive".into());
    }
    let (url, _own) = match &args.redis {
        Some(url) => (url.clone(), None),
        None => {
            let (url, server) = start_redis()?;
            (url, Some(server))
        }
    };
    println!(
        "{} nodes, limit {}/s, {} s per phase",
        args.nodes, args.rate, args.seconds
    );
    let local = phase(&args, None);
    println!(
        "local limits:  receiver saw {local:.1}/s  (N x R = {:.0}/s: the limit drifts with the fleet)",
        args.nodes as f64 * args.rate
    );
    let shared = phase(&args, Some(&url));
    println!(
        "redis limit:   receiver saw {shared:.1}/s  (R = {:.0}/s, error {:+.2} %)",
        args.rate,
        (shared - args.rate) / args.rate * 100.0
    );
    Ok(())
}
