//! Permits per second through one node: `RedisRate` leasing ahead vs one
//! `EVALSHA` of the same script per job, in the same run, against the same
//! local redis-server; then `redis-benchmark` running that `EVALSHA` on the
//! same machine for reference.
//!
//! ```text
//! cargo bench --features redis --bench redis
//! REDIS_URL=redis://127.0.0.1:6379/ cargo bench --features redis --bench redis
//! ```
//! Without `REDIS_URL` it starts its own `redis-server` on a free port.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dripfeed::PermitSource;
use dripfeed::global::{RedisConnection, RedisRate};

const RUN: Duration = Duration::from_secs(3);
/// Far above what one node can take: the bucket never limits, so the
/// numbers measure the mechanism.
const GLOBAL: f64 = 1e9;
const LOCAL: f64 = 200_000.0;

struct OwnServer(Child);

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server() -> Result<(String, u16, Option<OwnServer>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .unwrap_or(6379);
        return Ok((url, port, None));
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()?;
    let own = OwnServer(child);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(5) {
            return Err("redis-server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((format!("redis://127.0.0.1:{port}/"), port, Some(own)))
}

/// Takes permits as fast as one drain could, for `RUN`.
async fn leasing(url: &str) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let conn = RedisConnection::open(url)?;
    let fleet = RedisRate::builder(conn, "bench-lease", GLOBAL).start()?;
    fleet.set_local_rate(LOCAL);
    let start = Instant::now();
    let mut taken = 0u64;
    while start.elapsed() < RUN {
        for _ in 0..1024 {
            if let Some(permit) = fleet.try_take() {
                permit.spend();
                taken += 1;
            } else {
                fleet.ready().await;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let per_1000 = fleet.round_trips() as f64 * 1000.0 / taken.max(1) as f64;
    println!(
        "leasing ({} permits a lease): {taken} permits in {secs:.2} s = {:.0}/s, {} round trips = {per_1000:.2} per 1,000 jobs",
        fleet.lease_size(),
        taken as f64 / secs,
        fleet.round_trips()
    );
    Ok((taken as f64 / secs, per_1000))
}

/// One EVALSHA of the same script per job, waiting for each answer.
async fn per_job(url: &str) -> Result<f64, Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let script = redis::Script::new(include_str!("../src/global/scripts/rate.lua"));
    let start = Instant::now();
    let mut taken = 0u64;
    while start.elapsed() < RUN {
        let answer: (u64, u64, String) = script
            .key("{dripfeed:rate:bench-evalsha}")
            .arg("lease")
            .arg(1)
            .arg(GLOBAL)
            .arg(GLOBAL)
            .arg(500_000)
            .invoke_async(&mut conn)
            .await?;
        taken += answer.0;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "one EVALSHA per job:     {taken} permits in {secs:.2} s = {:.0}/s, 1,000 round trips per 1,000 jobs",
        taken as f64 / secs
    );
    Ok(taken as f64 / secs)
}

/// `redis-benchmark` running the same EVALSHA (1 client, then 50).
fn reference(port: u16) {
    let script = include_str!("../src/global/scripts/rate.lua");
    let sha = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "SCRIPT", "LOAD", script])
        .output();
    let Ok(sha) = sha else {
        println!("redis-benchmark reference: redis-cli not found");
        return;
    };
    let sha = String::from_utf8_lossy(&sha.stdout).trim().to_owned();
    for clients in ["1", "50"] {
        let out = Command::new("redis-benchmark")
            .args(["-p", &port.to_string(), "-c", clients, "-n", "100000", "-q"])
            .args([
                "EVALSHA",
                &sha,
                "1",
                "{dripfeed:rate:bench-rb}",
                "lease",
                "1",
            ])
            .args(["1e9", "1e9", "500000"])
            .output();
        match out {
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout);
                let line = text.rsplit('\r').next().unwrap_or(&text).trim().to_owned();
                println!("redis-benchmark EVALSHA, {clients:>2} client(s): {line}");
            }
            Err(e) => println!("redis-benchmark reference: {e}"),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing useful.
    let (url, port, _own) = server()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (leased, per_1000) = rt.block_on(leasing(&url))?;
    let single = rt.block_on(per_job(&url))?;
    println!(
        "leasing / per-job EVALSHA: {:.1}x; targets: >= 100,000 permits/s ({}), <= 10 round trips per 1,000 jobs ({})",
        leased / single,
        if leased >= 100_000.0 { "met" } else { "missed" },
        if per_1000 <= 10.0 { "met" } else { "missed" },
    );
    reference(port);
    Ok(())
}
