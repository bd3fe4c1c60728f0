//! A webhook relay on dripfeed: accepts webhooks over HTTP, queues them in a
//! leaky-bucket throttle, and delivers them to a fragile receiver at the
//! rate it can take. `--demo` drives the classic burst at itself and prints
//! what happened; without it the relay serves until Ctrl-C.
//!
//! ```text
//! cargo run --release --example webhook_relay -- --demo
//! cargo run --release --example webhook_relay -- --help
//! cargo run --release --features redis --example webhook_relay -- \
//!     --redis redis://127.0.0.1:6379/ --global-rate 200 --fleet-size 3 --redis-failure open
//! # tenant quotas: local, or shared by every relay through Redis or PostgreSQL
//! cargo run --release --example webhook_relay -- --tenant-rate 20 --tenant-burst 20
//! cargo run --release --features redis --example webhook_relay -- \
//!     --tenant-rate 20 --tenant-burst 20 --redis redis://127.0.0.1:6379/
//! cargo run --release --features postgres --example webhook_relay -- \
//!     --tenant-rate 20 --tenant-burst 20 --postgres postgres://user@127.0.0.1:5432/db
//! ```

mod app;

mod budget;

mod dead_letter;

mod demo;

mod fanout;

mod fanout_demo;

mod fleet;

mod idempotency;

mod latency;

mod receiver;

mod redrive;

mod tenants;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use dripfeed::keyed::Quota;
use dripfeed::rate::AimdConfig;
use dripfeed::{Outcome, Overflow, RetryPolicy};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use app::{Relay, RelayConfig};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OverflowFlag {
    TailDrop,
    HeadDrop,
    DeadLetter,
}

/// A webhook relay that protects a fragile receiver with a dripfeed throttle.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Flags {
    /// Address the relay listens on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Where webhooks are delivered; without it a built-in fragile receiver starts on 127.0.0.1:8081.
    #[arg(long)]
    downstream: Option<String>,
    /// Capacity of the built-in receiver, requests per second.
    #[arg(long, default_value_t = 200.0)]
    receiver_capacity: f64,
    /// Drain rate, webhooks per second.
    #[arg(long, default_value_t = 200.0)]
    drain_rate: f64,
    /// Worst queueing delay accepted (capacity = budget × rate), e.g. 2s or 500ms.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    latency_budget: Duration,
    /// What happens when the queue is full.
    #[arg(long, value_enum, default_value = "tail-drop")]
    overflow: OverflowFlag,
    /// Where undeliverable webhooks are written, one JSON line each.
    #[arg(long, default_value = "dead-letter.jsonl")]
    dead_letter_file: PathBuf,
    /// Deliveries running at once (with destinations: shared by all).
    #[arg(long, default_value_t = 64)]
    max_in_flight: usize,
    /// A receiver, NAME=URL (repeatable): each gets its own leaky bucket,
    /// breaker and cap on --max-in-flight; a request names it with the
    /// --destination-header. Replaces --downstream.
    #[arg(long = "destination", value_parser = fanout::parse_destination)]
    destinations_flag: Vec<fanout::Endpoint>,
    /// Receivers from a JSON file: [{"name", "url", "rate"?, "ceiling"?,
    /// "budget"? (e.g. "2s"), "secret"? ("whsec_…": deliveries are signed,
    /// Standard Webhooks)}].
    #[arg(long = "destinations")]
    destinations_file: Option<PathBuf>,
    /// The header a request names its destination with.
    #[arg(long, default_value = "X-Destination")]
    destination_header: String,
    /// The most deliveries one destination may have running (its cap in
    /// --max-in-flight): a dead receiver holds no more.
    #[arg(long, default_value_t = 8)]
    max_in_flight_per_destination: usize,
    /// How long a delivery may take before it counts as failed, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    deliver_timeout: Duration,
    /// Bytes of bodies the relay may hold (queued or in flight); over it, 503.
    #[arg(long, default_value_t = 64 << 20)]
    max_queue_bytes: u64,
    /// Let the drain rate follow the receiver's p99 (AIMD between --floor and --ceiling).
    #[arg(long)]
    adaptive: bool,
    /// Lowest adaptive rate, per second.
    #[arg(long, default_value_t = 20.0)]
    floor: f64,
    /// Highest adaptive rate, per second.
    #[arg(long, default_value_t = 400.0)]
    ceiling: f64,
    /// The receiver p99 the adaptive drain aims under, e.g. 150ms.
    #[arg(long, default_value = "150ms", value_parser = humantime::parse_duration)]
    target_p99: Duration,
    /// Each tenant's sustained rate, webhooks/s (with --tenant-burst); over it, 429.
    #[arg(long)]
    tenant_rate: Option<f64>,
    /// Each tenant's burst, webhooks.
    #[arg(long, default_value_t = 50.0)]
    tenant_burst: f64,
    /// Header naming the tenant.
    #[arg(long, default_value = "X-Tenant")]
    tenant_header: String,
    /// Retries after the first attempt: a webhook the receiver answers 408,
    /// 429 or 5xx (or never answers) is tried again after exponential
    /// backoff with full jitter, or after the receiver's Retry-After; 0 = no
    /// retries. Other 4xx are final.
    #[arg(long, default_value_t = 8)]
    retries: u32,
    /// The first retry's backoff ceiling (it doubles per retry), e.g. 1s.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    retry_min: Duration,
    /// The longest backoff, and the cap on a receiver's Retry-After, e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    retry_max: Duration,
    /// Where accepted webhooks are journaled: a 202 is answered once the
    /// webhook is on disk there, and a restart on the same directory
    /// delivers what was unfinished.
    #[arg(long, default_value = "relay-journal")]
    journal_dir: PathBuf,
    /// Keep webhooks in memory only: a crash loses what was accepted.
    #[arg(long)]
    no_journal: bool,
    /// Re-admit the webhooks of a dead-letter file (under their ids) at
    /// start, then serve; the file is only read (not this relay's own
    /// --dead-letter-file).
    #[arg(long)]
    redrive: Option<PathBuf>,
    /// How long shutdown keeps draining before dead-lettering the rest.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Drive the classic burst (1,000 requests/s for 5 s) at the relay, print a summary and exit.
    #[arg(long)]
    demo: bool,
    /// Start three receivers (healthy, slow at 20/s, dead), flood each at
    /// 40/s for 10 s through the relay, print per destination what was
    /// accepted, delivered, refused and dead-lettered, and exit.
    #[arg(long)]
    demo_fanout: bool,
    #[command(flatten)]
    fleet: fleet::FleetFlags,
    /// PostgreSQL URL holding the tenant quotas shared by every relay (with
    /// --tenant-rate; needs `--features postgres`), e.g.
    /// postgres://user@127.0.0.1:5432/db. Without it (and without --redis),
    /// tenant quotas are local.
    #[arg(long)]
    postgres: Option<String>,
    /// What to do while PostgreSQL is unreachable: admit on local buckets, or refuse (503).
    #[arg(long, value_enum, default_value = "closed")]
    postgres_failure: fleet::FailureFlag,
}

fn install_prometheus() -> Result<PrometheusHandle, String> {
    let seconds = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
        .and_then(|b| b.install_recorder())
        .map_err(|e| e.to_string())?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// One status line a second: on a terminal it rewrites itself.
fn spawn_status(relay: Arc<Relay>) {
    tokio::spawn(async move {
        let tty = std::io::stdout().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            let p99 = relay.latencies.take_p99();
            let a = &relay.answers;
            let load =
                |x: &std::sync::atomic::AtomicU64| x.load(std::sync::atomic::Ordering::Relaxed);
            let (depth, capacity, rate, delivered, dead) = match &relay.fanout {
                Some(f) => f.totals(),
                None => {
                    let s = relay.throttle.stats();
                    let dead = s.outcome(Outcome::DeadLettered) + s.outcome(Outcome::Evicted);
                    (s.depth(), s.capacity(), s.drain_rate(), s.delivered(), dead)
                }
            };
            let line = format!(
                "depth {:>5}/{:<5} ({:>6} KiB) rate {:>6.1}/s p99 {:>7} delivered {:>7} | 503 full {} bytes {} store {} journal {} | 429 {} | 413 {} | dead-lettered {}",
                depth,
                capacity,
                relay.budget.held() / 1024,
                rate,
                p99.map_or("-".into(), |p| format!("{:.1}ms", p.as_secs_f64() * 1000.0)),
                delivered,
                load(&a.full_503),
                load(&a.bytes_503),
                load(&a.store_503),
                load(&a.journal_503),
                load(&a.quota_429),
                load(&a.too_large_413),
                dead,
            );
            let mut out = std::io::stdout().lock();
            if let Some(f) = &relay.fanout {
                // One line per destination: no in-place redraw.
                let _ = writeln!(out, "{line}");
                for l in f.status_lines() {
                    let _ = writeln!(out, "{l}");
                }
                continue;
            }
            if tty {
                let _ = write!(out, "\r\x1b[2K{line}");
                let _ = out.flush();
            } else {
                let _ = writeln!(out, "{line}");
            }
        }
    });
}

async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[tokio::main]
async fn main() {
    let flags = Flags::parse();
    if let Err(e) = run(flags).await {
        eprintln!("webhook_relay: {e}");
        std::process::exit(1);
    }
}

async fn run(flags: Flags) -> Result<(), String> {
    let prometheus = install_prometheus()?;
    let mut flags = flags;
    if flags.demo_fanout {
        let rx = fanout_demo::start_receivers()
            .await
            .map_err(|e| format!("starting the demo's receivers: {e}"))?;
        for (name, url) in &rx.urls {
            let ep = fanout::parse_destination(&format!("{name}={url}"))?;
            let (rate, ceiling) = match name.as_str() {
                "slow" => (18.0, 20.0),
                "dead" => (50.0, 50.0), // a queue of 100 (2 s): full in 2.5 s
                _ => (100.0, 100.0),
            };
            let ep = fanout::Endpoint {
                rate: Some(rate),
                ceiling: Some(ceiling),
                ..ep
            };
            flags.destinations_flag.push(ep);
        }
        flags.deliver_timeout = flags.deliver_timeout.min(Duration::from_secs(2));
        flags.no_journal = true;
        flags.downstream = Some(rx.urls[0].1.clone());
    }
    let (downstream, receiver) = downstream(&flags).await?;
    let cfg = relay_config(&flags, &downstream)?;
    let journal_dir = cfg.journal.clone();
    let relay = start_relay(&flags, cfg).await?;
    match &journal_dir {
        Some(dir) => println!(
            "journal {}: recovered {} unfinished webhooks, delivering them first",
            dir.display(),
            relay.recovered
        ),
        None => println!("no journal: accepted webhooks live in memory only"),
    }
    let stop = Arc::new(tokio::sync::Notify::new());
    let server_stop = stop.clone();
    let (addr, server) = app::serve(
        flags.listen,
        app::router(relay.clone(), Some(prometheus)),
        async move { server_stop.notified().await },
    )
    .await
    .map_err(|e| format!("listening on {}: {e}", flags.listen))?;
    match &relay.fanout {
        Some(f) => println!(
            "webhook relay on http://{addr}: POST /v1/webhooks/deliver with {}: NAME, GET /metrics, GET /healthz\n\
             {} destinations ({}), each at {}/s unless configured, {:?} budget, {} in flight each of {} shared",
            flags.destination_header,
            f.names.len(),
            f.names.iter().map(|n| &**n).collect::<Vec<_>>().join(", "),
            flags.drain_rate,
            flags.latency_budget,
            flags.max_in_flight_per_destination,
            flags.max_in_flight,
        ),
        None => println!(
            "webhook relay on http://{addr}: POST /v1/webhooks/deliver, GET /metrics, GET /healthz\n\
             delivering to {downstream} at {}/s, capacity {} ({:?} budget), overflow {:?}",
            relay.throttle.drain_rate(),
            relay.throttle.capacity(),
            flags.latency_budget,
            flags.overflow,
        ),
    }
    if let Some(file) = &flags.redrive {
        let done = redrive::redrive(&relay, file).await?;
        println!(
            "redrive {}: {} re-admitted, {} refused, {} unreadable lines",
            file.display(),
            done.readmitted,
            done.refused,
            done.unreadable
        );
    }
    let outcome = if flags.demo_fanout {
        fanout_demo::run(addr, &relay, &flags.destination_header, 10).await
    } else if flags.demo {
        let tenants = flags.tenant_rate.is_some();
        demo::run(
            addr,
            &relay,
            tenants,
            receiver.as_deref(),
            flags.shutdown_grace,
        )
        .await
    } else {
        serve_until_stopped(addr, &relay, &flags).await
    };
    stop.notify_one();
    let _ = server.await;
    if flags.demo
        && let Some(dir) = &journal_dir
    {
        drop(relay);
        let _ = std::fs::remove_dir_all(dir);
    }
    outcome
}

/// The receiver's URL: `--downstream`, or a built-in receiver on 127.0.0.1:8081.
async fn downstream(flags: &Flags) -> Result<(String, Option<Arc<receiver::Receiver>>), String> {
    if let Some(url) = &flags.downstream {
        return Ok((url.clone(), None));
    }
    let rx = receiver::Receiver::new(flags.receiver_capacity);
    let at = "127.0.0.1:8081".parse().map_err(|_| "bad address")?;
    let addr = receiver::serve(at, rx.clone())
        .await
        .map_err(|e| format!("starting the built-in receiver on {at}: {e}"))?;
    Ok((format!("http://{addr}/hooks"), Some(rx)))
}

fn relay_config(flags: &Flags, downstream: &str) -> Result<RelayConfig, String> {
    let tenant_quota = match flags.tenant_rate {
        Some(rate) => {
            Some(Quota::new(flags.tenant_burst, rate).map_err(|e| format!("tenant quota: {e}"))?)
        }
        None => None,
    };
    let adaptive = match flags.adaptive {
        true => Some(
            AimdConfig::default()
                .with_floor(flags.floor)
                .with_ceiling(flags.ceiling)
                .with_target_p99(flags.target_p99)
                .build()
                .map_err(|e| format!("adaptive drain: {e}"))?,
        ),
        false => None,
    };
    Ok(RelayConfig {
        drain_rate: flags.drain_rate,
        latency_budget: flags.latency_budget,
        overflow: match flags.overflow {
            OverflowFlag::TailDrop => Overflow::TailDrop,
            OverflowFlag::HeadDrop => Overflow::HeadDrop,
            OverflowFlag::DeadLetter => Overflow::DeadLetter,
        },
        dead_letter_file: flags.dead_letter_file.clone(),
        max_in_flight: flags.max_in_flight,
        max_queue_bytes: flags.max_queue_bytes,
        downstream: downstream.to_owned(),
        tenant_header: flags.tenant_header.clone(),
        deliver_timeout: flags.deliver_timeout,
        tenant_quota,
        adaptive,
        retry: match flags.retries {
            0 => None,
            n => Some(
                RetryPolicy::new(n.saturating_add(1)).backoff(flags.retry_min, flags.retry_max),
            ),
        },
        journal: match (flags.no_journal, flags.demo) {
            (true, _) => None,
            // One demo never replays into the next.
            (false, true) => Some(
                std::env::temp_dir()
                    .join(format!("webhook-relay-demo-journal-{}", std::process::id())),
            ),
            (false, false) => Some(flags.journal_dir.clone()),
        },
        fanout: fanout_config(flags)?,
    })
}

/// The destinations of `--destination` and `--destinations`, if any.
fn fanout_config(flags: &Flags) -> Result<Option<fanout::FanoutConfig>, String> {
    let mut endpoints = flags.destinations_flag.clone();
    if let Some(file) = &flags.destinations_file {
        endpoints.extend(fanout::load(file)?);
    }
    if endpoints.is_empty() {
        return Ok(None);
    }
    if flags.fleet.redis.is_some() {
        return Err(
            "destinations do not take a fleet limit (--redis) yet; tenant quotas work (--tenant-rate, with --postgres to share them)"
                .into(),
        );
    }
    if flags.max_in_flight_per_destination == 0 {
        return Err("--max-in-flight-per-destination must be at least 1".into());
    }
    Ok(Some(fanout::FanoutConfig {
        endpoints,
        header: flags.destination_header.clone(),
        max_in_flight_per_destination: flags.max_in_flight_per_destination,
        max_in_flight: flags.max_in_flight,
        max_jobs: 1_000_000,
        breaker: dripfeed::destinations::BreakerConfig::default(),
    }))
}

/// The relay with its fleet permits (`--redis`) and tenant quotas shared
/// through `--postgres`, else `--redis`, else local.
async fn start_relay(flags: &Flags, cfg: RelayConfig) -> Result<Arc<Relay>, String> {
    let permits = flags.fleet.permits(flags.drain_rate)?;
    let on_failure = |flag: fleet::FailureFlag| flag.failure(flags.fleet.fleet_size);
    let tenants = match (&flags.postgres, &flags.fleet.redis, cfg.tenant_quota) {
        (Some(url), _, Some(quota)) => {
            Some(tenants::open_postgres(url, quota, on_failure(flags.postgres_failure)).await?)
        }
        (Some(_), _, None) => {
            return Err("--postgres holds tenant quotas: give --tenant-rate too".into());
        }
        (None, Some(url), Some(quota)) => Some(tenants::open_redis(
            url,
            quota,
            on_failure(flags.fleet.redis_failure),
        )?),
        _ => None,
    };
    Relay::start_with(cfg, permits, tenants)
        .await
        .map_err(|e| e.to_string())
}

/// Serves until Ctrl-C or SIGTERM, then drains for the grace and
/// dead-letters what remains.
async fn serve_until_stopped(
    addr: SocketAddr,
    relay: &Arc<Relay>,
    flags: &Flags,
) -> Result<(), String> {
    println!(
        "try: curl -X POST -d '{{\"hello\":1}}' -H 'content-type: application/json' http://{addr}/v1/webhooks/deliver"
    );
    println!("or run with --demo; Ctrl-C drains the queue and exits");
    spawn_status(relay.clone());
    stop_signal().await;
    println!(
        "\nshutting down: refusing new webhooks, draining for up to {:?}",
        flags.shutdown_grace
    );
    let (mut delivered, mut kept) = (0, 0);
    if let Some(f) = &relay.fanout {
        let (stats, returned) = f.set.shutdown(flags.shutdown_grace).await;
        for (_, job) in returned {
            let _ = relay.sink.offer(job, "shutdown");
        }
        delivered += stats.iter().map(|s| s.delivered()).sum::<u64>();
        kept += stats.iter().map(|s| s.kept()).sum::<u64>();
    }
    let report = relay.throttle.shutdown(flags.shutdown_grace).await;
    for job in report.returned {
        let _ = relay.sink.offer(job, "shutdown");
    }
    delivered += report.stats.delivered();
    kept += report.stats.outcome(Outcome::Kept);
    let lines = relay.sink.written().await;
    println!(
        "delivered {delivered}, kept in the journal for the next start {kept}, dead-letter file {} ({lines} lines this run)",
        flags.dead_letter_file.display()
    );
    Ok(())
}
