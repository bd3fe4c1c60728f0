//! The adaptive drain against a real receiver, in real time: an HTTP/1.1
//! server on loopback with a fixed pool of worker threads, each answering one
//! request at a time after sleeping the service time (6 workers × 50 ms by
//! default, so its capacity is C = 6 / 0.05 s = 120 requests/s). A request
//! that finds every worker busy waits in the listen backlog, so latency grows
//! with the backlog when the receiver is overrun, as a real one does.
//!
//! The client is a dripfeed throttle with `.adaptive(..)` and the default
//! [`AimdConfig`] (ceiling raised to 400/s), fed by a producer offering 2 × C
//! and delivering each job as one HTTP request on a connection of its own.
//! Each run lasts 40 s; the program prints each second's deliveries, the
//! drain rate and the p99 the client saw, then the delivery rate over the
//! last 15 s as mean, min and max in units of C.
//!
//! ```text
//! cargo build --release --example aimd_real
//! target/release/examples/aimd_real --runs 3
//! target/release/examples/aimd_real --serve 127.0.0.1:8099     # only the receiver
//! target/release/examples/aimd_real --target 127.0.0.1:8099    # only the client
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use dripfeed::rate::AimdConfig;
use dripfeed::{Attempt, Delivery, Throttle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// Runs the adaptive drain against a real thread-pool HTTP receiver.
#[derive(Parser, Debug)]
#[command(about)]
struct Flags {
    /// Receiver worker threads.
    #[arg(long, default_value_t = 6)]
    workers: usize,
    /// Receiver service time per request, milliseconds.
    #[arg(long, default_value_t = 50)]
    service_ms: u64,
    /// Length of one run, seconds.
    #[arg(long, default_value_t = 40)]
    secs: u64,
    /// The measured tail of each run, seconds.
    #[arg(long, default_value_t = 15)]
    tail: u64,
    /// Offered load as a multiple of C.
    #[arg(long, default_value_t = 2.0)]
    offered: f64,
    /// How many runs, one after the other (each with a fresh receiver).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// AIMD ceiling, jobs/s.
    #[arg(long, default_value_t = 400.0)]
    ceiling: f64,
    /// Print only the summary line of each run.
    #[arg(long)]
    quiet: bool,
    /// Only run the receiver, on this address, until killed.
    #[arg(long)]
    serve: Option<SocketAddr>,
    /// Deliver to a receiver already running there instead of starting one.
    #[arg(long)]
    target: Option<SocketAddr>,
}

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Starts the receiver: `workers` threads share one listener; each takes a
/// connection, reads the request head, sleeps `service`, answers 200 and
/// closes. Requests beyond the busy workers wait in the listen backlog.
fn serve(addr: SocketAddr, workers: usize, service: Duration) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    for _ in 0..workers {
        let listener = listener.try_clone()?;
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, service);
            }
        });
    }
    Ok(local)
}

fn answer(mut stream: TcpStream, service: Duration) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    std::thread::sleep(service);
    stream.write_all(RESPONSE)
}

/// One request on a fresh connection; `true` on a 200.
async fn post(addr: SocketAddr) -> std::io::Result<bool> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    s.write_all(
        b"POST /hook HTTP/1.1\r\nHost: receiver\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let mut reply = Vec::with_capacity(128);
    s.read_to_end(&mut reply).await?;
    Ok(reply.starts_with(b"HTTP/1.1 200"))
}

/// Per-second counts and latencies of one run, by completion time.
struct Seconds {
    delivered: Vec<AtomicU64>,
    latencies: Mutex<Vec<Vec<Duration>>>,
}

/// What one run measured over its tail, in units of C.
struct Tail {
    mean: f64,
    min: f64,
    max: f64,
}

async fn run(flags: &Flags, addr: SocketAddr, capacity: f64) -> Tail {
    let secs = flags.secs as usize;
    let seconds = Arc::new(Seconds {
        delivered: (0..secs + 2).map(|_| AtomicU64::new(0)).collect(),
        latencies: Mutex::new(vec![Vec::new(); secs + 2]),
    });
    let start = Instant::now();
    let aimd = AimdConfig::default()
        .with_ceiling(flags.ceiling)
        .build()
        .expect("valid AIMD settings");
    let record = seconds.clone();
    let (throttle, _drain) = Throttle::builder()
        .adaptive(aimd)
        .latency_budget(Duration::from_secs(2))
        .max_in_flight(512)
        .deliver_timeout(Duration::from_secs(2))
        .build(move |_: &u64, _: Attempt| {
            let record = record.clone();
            async move {
                let sent = Instant::now();
                match post(addr).await {
                    Ok(true) => {
                        let latency = sent.elapsed();
                        let at = start.elapsed().as_secs() as usize;
                        if let Some(n) = record.delivered.get(at) {
                            n.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Ok(mut l) = record.latencies.lock()
                            && let Some(v) = l.get_mut(at)
                        {
                            v.push(latency);
                        }
                        Delivery::Done
                    }
                    _ => Delivery::Failed,
                }
            }
        })
        .expect("valid throttle settings");

    let producer = {
        let throttle = throttle.clone();
        let offered = flags.offered * capacity;
        tokio::spawn(async move {
            let mut owed = 0.0;
            let mut n = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = Instant::now();
            loop {
                tick.tick().await;
                let now = Instant::now();
                owed += offered * (now - last).as_secs_f64();
                last = now;
                while owed >= 1.0 {
                    owed -= 1.0;
                    let _ = throttle.try_submit(n);
                    n += 1;
                }
            }
        })
    };
    let mut rates = Vec::with_capacity(secs);
    for s in 1..=secs {
        tokio::time::sleep_until(start + Duration::from_secs(s as u64)).await;
        rates.push(throttle.drain_rate());
    }
    producer.abort();
    throttle.shutdown(Duration::ZERO).await;

    let counts: Vec<u64> = seconds
        .delivered
        .iter()
        .take(secs)
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    let mut lat = seconds
        .latencies
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    if !flags.quiet {
        println!("  s  delivered  drain rate  p99 (ms)");
        for (s, (count, rate)) in counts.iter().zip(&rates).enumerate() {
            let l = &mut lat[s];
            l.sort();
            let p99 = l
                .get((l.len() * 99 / 100).min(l.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
            println!("{:>3}  {count:>9}  {rate:>10.1}  {p99:>8.0}", s + 1);
        }
    }
    let tail = &counts[secs.saturating_sub(flags.tail as usize)..];
    let mean = tail.iter().sum::<u64>() as f64 / tail.len().max(1) as f64;
    let min = tail.iter().copied().min().unwrap_or(0) as f64;
    let max = tail.iter().copied().max().unwrap_or(0) as f64;
    Tail {
        mean: mean / capacity,
        min: min / capacity,
        max: max / capacity,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse();
    let service = Duration::from_millis(flags.service_ms);
    let capacity = flags.workers as f64 / service.as_secs_f64();
    if let Some(addr) = flags.serve {
        let local = serve(addr, flags.workers, service)?;
        println!(
            "receiver on {local}: {} workers × {service:?}, C = {capacity}/s",
            flags.workers
        );
        std::future::pending::<()>().await;
    }
    println!(
        "receiver: {} workers × {service:?}, C = {capacity}/s; offered {}/s; {} s runs, last {} s measured",
        flags.workers,
        flags.offered * capacity,
        flags.secs,
        flags.tail
    );
    let mut rows = Vec::new();
    for i in 1..=flags.runs {
        let addr = match flags.target {
            Some(addr) => addr,
            None => serve(([127, 0, 0, 1], 0).into(), flags.workers, service)?,
        };
        let t = run(&flags, addr, capacity).await;
        println!(
            "run {i}: delivered/s over the last {} s: mean {:.3} C, min {:.3} C, max {:.3} C",
            flags.tail, t.mean, t.min, t.max
        );
        rows.push(t);
    }
    if rows.len() > 1 {
        println!("\n| run | mean | min | max |\n|---|---|---|---|");
        for (i, t) in rows.iter().enumerate() {
            println!(
                "| {} | {:.3} C | {:.3} C | {:.3} C |",
                i + 1,
                t.mean,
                t.min,
                t.max
            );
        }
    }
    Ok(())
}
