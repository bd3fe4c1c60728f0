//! Admissions per second through `PgBuckets`: one pooled connection (one
//! admission in flight at a time), then a pool of 8 connections with 32
//! tasks admitting concurrently, against a local PostgreSQL, keys spread
//! over 10,000 buckets whose quota never refuses (the numbers measure the
//! mechanism: one prepared upsert per admission, plus amortised pruning).
//!
//! ```text
//! cargo bench --features postgres --bench postgres
//! PG_URL=postgres://user@127.0.0.1/db cargo bench --features postgres --bench postgres
//! ```
//! Without `PG_URL` it starts its own server (see `tests/support/postgres.rs`).
//! With `--features postgres,redis` and `redis-server` installed, it then
//! measures `RedisBuckets::try_admit` the same way for reference (one
//! multiplexed connection, 1 task then 32 tasks).

#[path = "../tests/support/postgres.rs"]
mod support_postgres;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dripfeed::global::PgBuckets;
use dripfeed::keyed::{BucketStore, Quota};

const RUN: Duration = Duration::from_secs(3);
const KEYS: u64 = 10_000;

async fn measure(url: &str, table: &str, pool_size: usize, tasks: usize) -> f64 {
    let quota = Quota::per_second(1e9).burst(1e12).expect("quota");
    let pool = PgBuckets::pool(url, pool_size).expect("pool");
    let buckets = Arc::new(PgBuckets::new(pool, table, quota).expect("table"));
    buckets.migrate().await.expect("migrate");
    rate(tasks, move |key| {
        let buckets = buckets.clone();
        async move { buckets.try_admit(&key, 1.0).await.is_ok() }
    })
    .await
}

/// Admissions per second by `tasks` tasks calling `admit` for `RUN`.
async fn rate<F, Fut>(tasks: usize, admit: F) -> f64
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    // Warm up: connections opened, statements prepared.
    for i in 0..200 {
        assert!(admit(format!("k{i}")).await, "warm-up admission");
    }
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (admit, done) = (admit.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = t as u64;
                while start.elapsed() < RUN {
                    if admit(format!("k{}", i % KEYS)).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    i = i
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407)
                        >> 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not run us.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let own;
    let url = match std::env::var("PG_URL") {
        Ok(url) => url,
        Err(_) => {
            if !support_postgres::available("bench postgres") {
                return;
            }
            own = support_postgres::PgServer::start();
            own.url()
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let one = measure(&url, "bench_one", 1, 1).await;
        println!("postgres/PgBuckets::try_admit  1 connection,  1 task : {one:>9.0} admissions/s");
        let eight = measure(&url, "bench_pool", 8, 32).await;
        println!(
            "postgres/PgBuckets::try_admit  pool of 8,    32 tasks: {eight:>9.0} admissions/s"
        );
        #[cfg(feature = "redis")]
        redis_reference().await;
    });
}

/// The same admissions through `RedisBuckets`, against an own `redis-server`.
#[cfg(feature = "redis")]
async fn redis_reference() {
    use dripfeed::global::{RedisBuckets, RedisConnection};
    use std::process::{Command, Stdio};

    let port = support_postgres::free_port();
    let Ok(mut child) = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
    else {
        println!("redis reference: redis-server not found");
        return;
    };
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        && start.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let conn = RedisConnection::open(&format!("redis://127.0.0.1:{port}/")).expect("redis url");
    let quota = Quota::per_second(1e9).burst(1e12).expect("quota");
    let buckets = Arc::new(RedisBuckets::new(conn, "bench", quota));
    for tasks in [1, 32] {
        let b = buckets.clone();
        let r = rate(tasks, move |key| {
            let b = b.clone();
            async move { b.try_admit(&key, 1.0).await.is_ok() }
        })
        .await;
        println!(
            "redis/RedisBuckets::try_admit  1 connection, {tasks:>2} tasks: {r:>9.0} admissions/s"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
