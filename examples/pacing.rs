//! Pacing accuracy in real time: `cargo run --release --example pacing`.
//!
//! For target rates of 10, 1,000, 100,000 and 1,000,000 jobs/s it measures,
//! for dripfeed's drain and for its peers, the achieved rate, the largest
//! burst in any 1 ms window and the process's CPU share while pacing:
//!
//! - `dripfeed`: a throttle at rate R whose queue is pre-filled with every
//!   job of the run before the drain starts (`build_unspawned`, then spawn);
//!   the downstream records an `Instant` per job into a preallocated buffer.
//!   Deliveries run as in production (`Dispatch::Inline`, polled by the
//!   drain task).
//! - `governor`: `until_ready().await` in a loop on a direct limiter,
//!   `Quota::per_second(R)` with a burst of one millisecond's worth
//!   (`max(1, R/1000)`), the same catch-up allowance dripfeed's drain has.
//! - `leaky-bucket`: `acquire_one().await` in a loop; `refill` tokens every
//!   `interval` with `interval = max(1 ms, 1/R)`, `refill = R × interval`,
//!   `max = refill` (its interval is whole milliseconds), `initial = 0`.
//! - `tower`: `ServiceBuilder::new().rate_limit(n, per)` over a
//!   `service_fn`, driven by `ready().await` then `call(job).await`, with
//!   `per = max(1 ms, 1/R)` and `n = R × per`.
//! - `sleep`: the naive floor, `tokio::time::sleep(1/R).await` per job.
//!
//! All run on one multi-thread tokio runtime with two workers. The achieved
//! rate is `(n - 1) / (t_last - t_first)` over the jobs that went out before
//! the run's deadline (`1.2 × N/R + 0.5 s`); CPU share is the CPU time of
//! every thread of this process (from `/proc/self/task/*/schedstat`) over
//! the wall time, so 100 % is one core of the machine's two.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dripfeed::{Delivery, Throttle};
use tokio::sync::Notify;
use tower::{Service, ServiceBuilder, ServiceExt};

/// Records when each job went out.
struct Recorder {
    epoch: Instant,
    stamps: Vec<AtomicU64>,
    count: AtomicU64,
    stop: AtomicBool,
    all: Notify,
}

impl Recorder {
    fn new(jobs: usize) -> Arc<Self> {
        Arc::new(Recorder {
            epoch: Instant::now(),
            stamps: (0..jobs).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            all: Notify::new(),
        })
    }

    fn record(&self, job: usize) {
        let ns = self.epoch.elapsed().as_nanos() as u64 + 1;
        self.stamps[job].store(ns, Ordering::Relaxed);
        if self.count.fetch_add(1, Ordering::Relaxed) + 1 == self.stamps.len() as u64 {
            self.all.notify_one();
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The recorded instants, ns since the epoch, sorted.
    fn times(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self
            .stamps
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&s| s != 0)
            .collect();
        t.sort_unstable();
        t
    }
}

/// CPU time of every thread of this process, ns.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| {
            let path = t.ok()?.path().join("schedstat");
            let text = std::fs::read_to_string(path).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

struct Outcome {
    jobs: usize,
    wanted: usize,
    achieved: f64,
    steady: f64,
    burst: usize,
    /// The most jobs in any window of one second.
    burst_1s: usize,
    cpu_share: f64,
}

fn analyse(rec: &Recorder, wanted: usize, wall: Duration, cpu: u64) -> Outcome {
    let t = rec.times();
    let achieved = match (t.first(), t.last()) {
        (Some(first), Some(last)) if t.len() > 1 && last > first => {
            (t.len() - 1) as f64 / ((last - first) as f64 / 1e9)
        }
        _ => 0.0,
    };
    // Least-squares slope of job index over time: the rate once running,
    // blind to a one-off start-up offset (the first job goes at once, the
    // second waits for a timer that fires late).
    let steady = if t.len() > 2 {
        let n = t.len() as f64;
        let mean_t = t.iter().map(|&x| (x - t[0]) as f64).sum::<f64>() / n;
        let mean_i = (n - 1.0) / 2.0;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (i, &x) in t.iter().enumerate() {
            let dx = (x - t[0]) as f64 - mean_t;
            sxy += dx * (i as f64 - mean_i);
            sxx += dx * dx;
        }
        sxy / sxx * 1e9
    } else {
        0.0
    };
    let burst = most_in_window(&t, 1_000_000);
    let burst_1s = most_in_window(&t, 1_000_000_000);
    Outcome {
        jobs: t.len(),
        wanted,
        achieved,
        steady,
        burst,
        burst_1s,
        cpu_share: cpu as f64 / wall.as_nanos() as f64,
    }
}

/// The most jobs in any window [t_i, t_i + width) of the sorted times `t` (ns).
fn most_in_window(t: &[u64], width: u64) -> usize {
    let (mut most, mut j) = (0, 0);
    for i in 0..t.len() {
        while j < t.len() && t[j] < t[i] + width {
            j += 1;
        }
        most = most.max(j - i);
    }
    most
}

/// Runs one paced loop (`run` spawns whatever emits and records); waits for
/// every job or the deadline.
async fn measure<F, Fut>(rate: f64, jobs: usize, run: F) -> Outcome
where
    F: FnOnce(Arc<Recorder>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let rec = Recorder::new(jobs);
    let deadline = Duration::from_secs_f64(1.2 * jobs as f64 / rate + 0.5);
    let cpu0 = cpu_ns();
    let start = Instant::now();
    let task = tokio::spawn(run(rec.clone()));
    let _ = tokio::time::timeout(deadline, rec.all.notified()).await;
    let wall = start.elapsed();
    let cpu = cpu_ns().saturating_sub(cpu0);
    rec.stop.store(true, Ordering::Relaxed);
    task.abort();
    let _ = task.await;
    analyse(&rec, jobs, wall, cpu)
}

/// One millisecond's worth of jobs at `rate` (at least one), and the period it covers.
fn per_tick(rate: f64) -> (u64, Duration) {
    if rate <= 1000.0 {
        (1, Duration::from_secs_f64(1.0 / rate))
    } else {
        ((rate / 1000.0).round() as u64, Duration::from_millis(1))
    }
}

async fn dripfeed(rate: f64, jobs: usize) -> Outcome {
    let rec = Recorder::new(jobs);
    let seen = rec.clone();
    let (throttle, drain) = Throttle::builder()
        .drain_rate(rate)
        .capacity(jobs)
        .max_in_flight(1024)
        .build_unspawned(move |job: &u32, _| {
            seen.record(*job as usize);
            async { Delivery::Done }
        })
        .expect("throttle");
    for job in 0..jobs as u32 {
        throttle.try_submit(job).expect("room for the whole run");
    }
    let deadline = Duration::from_secs_f64(1.2 * jobs as f64 / rate + 0.5);
    let cpu0 = cpu_ns();
    let start = Instant::now();
    let task = tokio::spawn(drain);
    let _ = tokio::time::timeout(deadline, rec.all.notified()).await;
    let wall = start.elapsed();
    let cpu = cpu_ns().saturating_sub(cpu0);
    let report = throttle.shutdown(Duration::ZERO).await;
    drop(report);
    let _ = task.await;
    analyse(&rec, jobs, wall, cpu)
}

async fn governor(rate: f64, jobs: usize) -> Outcome {
    let (burst, _) = per_tick(rate);
    let quota = governor::Quota::with_period(Duration::from_secs_f64(1.0 / rate))
        .expect("period")
        .allow_burst(NonZeroU32::new(burst as u32).expect("burst"));
    let limiter = governor::RateLimiter::direct(quota);
    measure(rate, jobs, move |rec| async move {
        for job in 0..jobs {
            if rec.stopped() {
                break;
            }
            limiter.until_ready().await;
            rec.record(job);
        }
    })
    .await
}

async fn leaky(rate: f64, jobs: usize) -> Outcome {
    let (refill, interval) = per_tick(rate);
    let limiter = leaky_bucket::RateLimiter::builder()
        .refill(refill as usize)
        .max(refill as usize)
        .initial(0)
        .interval(interval)
        .build();
    measure(rate, jobs, move |rec| async move {
        for job in 0..jobs {
            if rec.stopped() {
                break;
            }
            limiter.acquire_one().await;
            rec.record(job);
        }
    })
    .await
}

async fn tower(rate: f64, jobs: usize) -> Outcome {
    let (num, per) = per_tick(rate);
    measure(rate, jobs, move |rec| async move {
        let inner = rec.clone();
        let mut svc = ServiceBuilder::new()
            .rate_limit(num, per)
            .service(tower::service_fn(move |job: usize| {
                inner.record(job);
                async { Ok::<(), std::convert::Infallible>(()) }
            }));
        for job in 0..jobs {
            if rec.stopped() {
                break;
            }
            let Ok(ready) = svc.ready().await;
            let Ok(()) = ready.call(job).await;
        }
    })
    .await
}

async fn sleep(rate: f64, jobs: usize) -> Outcome {
    let gap = Duration::from_secs_f64(1.0 / rate);
    measure(rate, jobs, move |rec| async move {
        for job in 0..jobs {
            if rec.stopped() {
                break;
            }
            tokio::time::sleep(gap).await;
            rec.record(job);
        }
    })
    .await
}

/// How late tokio's timer fires here: what every timer-driven pacer is up against.
async fn timer_lateness() {
    let mut late: Vec<Duration> = Vec::with_capacity(500);
    for i in 0..500u64 {
        // Deadlines off the millisecond grid, as a pacer's are.
        let due = tokio::time::Instant::now() + Duration::from_micros(1_000 + 137 * (i % 7));
        tokio::time::sleep_until(due).await;
        late.push(tokio::time::Instant::now() - due);
    }
    late.sort_unstable();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "tokio sleep_until lateness over 500 sleeps: median {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
    println!();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // (rate, jobs): about 5 s per run (3 s at 1,000,000/s), enough for 0.1 %.
    let runs: [(f64, usize); 4] = [
        (10.0, 50),
        (1_000.0, 5_000),
        (100_000.0, 500_000),
        (1_000_000.0, 3_000_000),
    ];
    rt.block_on(async {
        timer_lateness().await;
        println!(
            "| target/s | pacer | jobs out / planned | achieved/s (first→last) | error | steady/s (fit) | error | max jobs in 1 ms (ideal) | max jobs in 1 s (bound) | CPU (1 core = 100 %) |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (rate, jobs) in runs {
            let ideal = (rate / 1000.0).ceil().max(1.0) as usize;
            // The output contract: at most ceil(1.01 R) + 1 in any second.
            let bound_1s = (1.01 * rate).ceil() as usize + 1;
            // PACING_ONLY=dripfeed runs one pacer (for quick iterations).
            let only = std::env::var("PACING_ONLY").ok();
            for name in ["dripfeed", "governor", "leaky-bucket", "tower", "sleep"] {
                if only.as_deref().is_some_and(|o| o != name) {
                    continue;
                }
                let o = match name {
                    "dripfeed" => dripfeed(rate, jobs).await,
                    "governor" => governor(rate, jobs).await,
                    "leaky-bucket" => leaky(rate, jobs).await,
                    "tower" => tower(rate, jobs).await,
                    _ => sleep(rate, jobs).await,
                };
                println!(
                    "| {rate:.0} | {name} | {} / {} | {:.1} | {:+.3} % | {:.1} | {:+.3} % | {} ({ideal}) | {} ({bound_1s}) | {:.0} % |",
                    o.jobs,
                    o.wanted,
                    o.achieved,
                    (o.achieved / rate - 1.0) * 100.0,
                    o.steady,
                    (o.steady / rate - 1.0) * 100.0,
                    o.burst,
                    o.burst_1s,
                    o.cpu_share * 100.0,
                );
                // Let the previous run's tasks and timers settle.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
}
