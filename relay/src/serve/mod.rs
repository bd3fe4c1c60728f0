//! Running the relay: from a checked configuration to a listening server,
//! in order — the demo's receivers (only for a demo), the library's own
//! checks, the metrics recorder, the dead-letter file, the HTTP client, the
//! tenant store and fleet permits, the destinations set and its journal,
//! then the listener (its address printed in a stable line), an optional
//! redrive, and the mode: serve until a signal, or a demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::auth::tenants::Tenants;
use crate::catalog::{self, Catalog};
use crate::config::{Config, ConfigError, ConfigErrors, DEFAULT_NAME, Origin};
use crate::dead_letter::{self, FileSink, redrive};
use crate::deliver::latency::Latencies;
use crate::deliver::target::Targets as _;
use crate::domain::budget::ByteBudget;
use crate::intake::idempotency::{self, Idempotency};
use crate::intake::{self, Answers, Intake};
use crate::status::Registry;
use crate::{admin, deliver, demo, listener, queue, shutdown, telemetry};

mod demo_prep;
mod shared_prep;

/// What the relay does once it listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Serve until a signal.
    Serve,
    /// `--demo`: the burst against one destination (the built-in receiver
    /// when none is configured).
    Demo,
    /// `--demo-fanout`: three built-in receivers, flooded.
    DemoFanout,
}

/// Why the relay stopped short.
#[derive(Debug)]
pub enum Failure {
    /// The configuration is refused (exit code 2).
    Config(ConfigErrors),
    /// Something failed while starting or running (exit code 1).
    Run(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Run(e)
    }
}

pub(crate) fn refused(key: &str, origin: Option<Origin>, message: impl Into<String>) -> Failure {
    Failure::Config(ConfigErrors(vec![ConfigError::new(key, origin, message)]))
}

/// Runs the relay with `cfg` in `mode`, first re-admitting `redrive`'s
/// dead letters if given.
pub async fn run(
    mut cfg: Config,
    mode: Mode,
    redrive_file: Option<PathBuf>,
) -> Result<(), Failure> {
    // The admin API's changes, over the configured destinations (a demo
    // keeps none).
    // With queue = redis they are the fleet's, in Redis, not a state file.
    let shared_queue = cfg.settings.queue == crate::config::value::QueueKind::Redis;
    let state = match (mode, catalog::state::dir_of(&cfg)) {
        (Mode::Serve, Some(dir)) if !shared_queue => Some(catalog::state::StateFile::open(&dir)?),
        (Mode::Serve, Some(dir)) if dir.join(catalog::state::FILE).exists() => {
            tracing::warn!(file = %dir.join(catalog::state::FILE).display(), "with queue = redis the admin API's changes are the fleet's, in Redis: this state file is not read");
            None
        }
        _ => None,
    };
    #[cfg(feature = "redis")]
    let fleet_start = match (mode, shared_queue) {
        (Mode::Serve, true) => Some(queue::shared_changes::read_at_start(&mut cfg).await?),
        _ => None,
    };
    if let Some(file) = &state {
        let errors = file.apply(&mut cfg);
        if !errors.is_empty() {
            return Err(Failure::Config(ConfigErrors(errors)));
        }
    }
    let changed = state.as_ref().is_some_and(|f| !f.is_empty());
    let receiver = demo_prep::prepare(&mut cfg, mode, changed).await?;
    let guard = Arc::new(deliver::guard::AddressGuard::from_config(&cfg));
    let mut errors = queue::check(&cfg);
    errors.extend(deliver::guard::check_destinations(&cfg, &guard).await);
    errors.extend(deliver::client::check_ca_file(&cfg));
    // A destination another relay of the fleet made that this one refuses
    // does not stop it from starting: it is left out here (the rest of the
    // fleet delivers it).
    errors.retain(|e| {
        let Some(crate::config::Origin::Fleet(_)) = &e.origin else {
            return true;
        };
        let Some(name) = e.key.strip_prefix("destinations.") else {
            return true;
        };
        tracing::error!(destination = %name, error = %e, "a destination the fleet's admin API made is refused here: left out on this relay");
        cfg.destinations.retain(|d| {
            d.name != name || !matches!(d.origin, crate::config::Origin::Fleet(_))
        });
        false
    });
    if !errors.is_empty() {
        return Err(Failure::Config(ConfigErrors(errors)));
    }
    let s = &cfg.settings;
    for (key, addr, locked) in cfg.listeners() {
        if !locked && s.allow_unauthenticated && !addr.ip().to_canonical().is_loopback() {
            tracing::warn!(
                %addr,
                listener = key,
                "serving without API keys (allow_unauthenticated): anyone who can reach it is let in"
            );
        }
    }
    if let Some(path) = &redrive_file {
        redrive::check_source(path, &s.dead_letter_file)
            .map_err(|e| refused("redrive", Some(Origin::Flag("--redrive".into())), e))?;
        if s.queue == crate::config::value::QueueKind::Redis {
            return Err(refused(
                "redrive",
                Some(Origin::Flag("--redrive".into())),
                "with queue = redis a redrive would go into this relay's own queue, not the fleet's: not there yet",
            ));
        }
    }
    let journal_dir = match (s.no_journal, mode) {
        (true, _) => None,
        // One demo never replays into the next.
        (false, Mode::Demo) => Some(std::env::temp_dir().join(format!(
            "dripfeed-relay-demo-journal-{}",
            std::process::id()
        ))),
        (false, _) => Some(s.journal_dir.clone()),
    };
    let prometheus = telemetry::install_prometheus()?;
    let fallback = match &cfg.destinations[..] {
        [only] => only.name.clone(),
        _ => "unknown".to_owned(),
    };
    let sink = Arc::new(
        FileSink::open(dead_letter::Options {
            path: s.dead_letter_file.clone(),
            fallback,
            max_bytes: s.dead_letter_max_bytes,
            keep: s.dead_letter_keep,
        })
        .map_err(|e| format!("dead_letter_file {e}"))?,
    );
    let latencies = Arc::new(Latencies::default());
    let tenant_store = intake::tenants::open(&cfg).await?;
    #[allow(unused_mut)] // the shared queue's check comes with redis only
    let mut stores: Vec<_> = tenant_store.iter().filter_map(|(_, c)| c.clone()).collect();
    let catalog = Arc::new(Catalog::new(&cfg.destinations));
    let status = Arc::new(Registry::new(
        s.status_retention,
        s.status_max,
        cfg.tenants.iter().map(|t| t.name.as_str()),
    ));
    let parts = queue::Parts {
        sink: sink.clone(),
        client: deliver::client::client(s, s.max_in_flight, guard.clone())?,
        guard: guard.clone(),
        latencies: latencies.clone(),
        tenants: tenant_store.as_ref().map(|(store, _)| store.clone()),
        // With queue = redis the drains have their own fleet permits.
        permits: match s.queue {
            crate::config::value::QueueKind::Redis => None,
            crate::config::value::QueueKind::Local => queue::fleet::permits(s).await?,
        },
        status: status.clone(),
        catalog: catalog.clone(),
    };
    let keyed = parts.tenants.is_some();
    if let Some(store) = &parts.tenants {
        intake::tenants::set_overrides(store.as_ref(), &cfg).await?;
    }
    // Ended statuses kept beside the journal, read back before recovery
    // starts delivering (so the ends it makes are written after them).
    if let Some(dir) = &journal_dir {
        private_dir(dir).map_err(|e| format!("journal_dir {}: {e}", dir.display()))?;
        match status.attach(dir, s.status_max) {
            Ok((remembered, bad)) => tracing::info!(
                remembered,
                unreadable_lines = bad,
                "webhook statuses read back from {}",
                dir.display()
            ),
            Err(e) => {
                let file = dir.join(crate::status::file::FILE);
                return Err(format!("webhook statuses {}: {e}", file.display()).into());
            }
        }
    }
    let queue = queue::build(&cfg, journal_dir.as_deref(), parts)?;
    // Webhooks the journal kept for destinations no longer configured (or
    // deleted through the admin API) have nowhere to go: dead-lettered now,
    // not one attempt at a time behind a breaker.
    let orphans: Vec<String> = queue
        .set
        .all_stats()
        .iter()
        .filter(|st| catalog.target(st.name()).is_none())
        .map(|st| st.name().to_owned())
        .collect();
    for name in orphans {
        if let Some((stats, returned)) = queue.set.remove(&name, std::time::Duration::ZERO).await {
            for job in returned {
                if sink.offer(job, "destination-unknown").is_err() {
                    tracing::error!(destination = %name, "the dead-letter writer is gone: a webhook for a destination no longer known was dropped");
                }
            }
            println!(
                "journal: {} webhooks for {name:?}, no longer a destination, dead-lettered",
                stats.dead_lettered() + stats.evicted()
            );
        }
    }
    let budget = ByteBudget::new(s.max_queue_bytes);
    // The relay's own tenant table holds names too: its bound is reserved.
    let _tenant_table = match intake::tenants::local(&cfg) {
        true => Some(
            budget
                .try_hold(intake::tenants::LOCAL_TABLE_BYTES)
                .ok_or_else(|| {
                    refused(
                        "max_queue_bytes",
                        cfg.origin("max_queue_bytes").cloned(),
                        format!(
                            "with tenant quotas in this relay's memory it must be above {} (its tenant table's bound)",
                            intake::tenants::LOCAL_TABLE_BYTES
                        ),
                    )
                })?,
        ),
        false => None,
    };
    let window = s.idempotency_window;
    // Opened only once the journal holds its directory's lock.
    let idempotency = match &queue.journal {
        Some(journal) => Idempotency::open(journal, budget.clone(), window, idempotency::MAX_KEYS)
            .map_err(|e| {
                // Name the file: in a shared (sticky) directory the journal
                // may open while another user's keys file cannot be replaced.
                let file = journal.dir().join("idempotency.jsonl");
                format!("idempotency keys {}: {e}", file.display())
            })?,
        None => Idempotency::in_memory(budget.clone(), window, idempotency::MAX_KEYS),
    };
    match &journal_dir {
        Some(dir) => println!(
            "journal {}: recovered {} unfinished webhooks, delivering them first",
            dir.display(),
            queue.recovered
        ),
        None => println!("no journal: accepted webhooks live in memory only"),
    }
    #[cfg(feature = "redis")]
    let shared = shared_prep::open(
        &cfg,
        &catalog,
        &latencies,
        &guard,
        tenant_store.as_ref().map(|(store, _)| store.clone()),
    )
    .await?;
    #[cfg(feature = "redis")]
    stores.extend(shared.clone().map(admin::stores::StoreCheck::queue));
    #[cfg(feature = "redis")]
    let fleet = match (fleet_start, &shared) {
        (Some(start), Some(shared)) => Some(
            queue::shared_changes::Fleet::start(
                start,
                shared.clone(),
                catalog.clone(),
                guard.clone(),
                s.resolve_destinations_at_start,
            )
            .await,
        ),
        _ => None,
    };
    let intake = Arc::new(Intake {
        set: queue.set.clone(),
        catalog: catalog.clone(),
        #[cfg(feature = "redis")]
        shared,
        destination_header: s.destination_header.clone(),
        tenant_header: s.tenant_header.clone(),
        tenants: Tenants::new(&cfg),
        keyed,
        budget,
        idempotency,
        answers: Answers::default(),
        max_body_bytes: s.max_body_bytes,
        body_read_timeout: s.body_read_timeout,
        dead_letter: sink.health(),
        status,
    });
    let limits = listener::Limits {
        max_connections: s.max_connections,
        header_read_timeout: s.header_read_timeout,
        label: "intake",
    };
    let admin = Arc::new(admin::Admin {
        intake: intake.clone(),
        prometheus,
        token: s.admin_token_sha256,
        catalog: catalog.clone(),
        defaults: admin::destinations::Defaults::of(&cfg),
        state_path: state
            .as_ref()
            .map_or_else(Default::default, |f| f.path().to_owned()),
        state: tokio::sync::Mutex::new(state),
        guard: guard.clone(),
        resolve: s.resolve_destinations_at_start,
        max_destinations: s.max_destinations.max(cfg.destinations.len()),
        grace: s.shutdown_grace,
        sink: sink.clone(),
        stores,
        dead_letter_file: s.dead_letter_file.clone(),
        redriving: tokio::sync::Mutex::new(()),
        #[cfg(feature = "redis")]
        fleet,
    });
    let (admin_tcp, admin_addr) = bind(s.admin_listen, "admin_listen").await?;
    let (tcp, addr) = bind(s.listen, "listen").await?;
    let admin_limits = listener::Limits {
        label: "admin",
        ..limits
    };
    let admin_server = listener::spawn(admin_tcp, admin::router(admin), admin_limits);
    let app = listener::app::App::with_direct(
        intake::router(intake.clone()),
        intake::direct(intake.clone()),
    );
    let server = listener::spawn(tcp, app, limits);
    tracing::info!(%addr, %admin_addr, destinations = cfg.destinations.len(), "listening");
    println!(
        "admin on http://{admin_addr}: GET /metrics, /healthz, /readyz, /v1/destinations{}",
        match s.admin_token_sha256 {
            Some(_) => " (the last with the admin token)",
            None => " (no admin token: loopback only)",
        }
    );
    announce(&cfg, addr);
    if let Some(path) = &redrive_file {
        let targets = catalog.targets();
        let done = redrive::redrive(path, &queue.set, &targets, &intake.budget).await?;
        println!(
            "redrive {}: {} re-admitted, {} refused, {} unreadable lines, {} kept in {}",
            path.display(),
            done.readmitted,
            done.refused,
            done.unreadable,
            done.kept,
            redrive::rest_of(path).display()
        );
    }
    let outcome = match mode {
        Mode::Demo => {
            let name = cfg
                .destinations
                .first()
                .map_or(DEFAULT_NAME, |d| d.name.as_str());
            demo::run(demo::Demo {
                addr,
                set: &queue.set,
                name,
                sink: &sink,
                tenants: keyed,
                receiver: receiver.as_deref(),
                grace: s.shutdown_grace,
            })
            .await
        }
        Mode::DemoFanout => {
            let cap = s.per_destination_cap(cfg.destinations.len());
            demo::fanout::run(addr, &queue.set, &s.destination_header, cap, 10).await
        }
        Mode::Serve => {
            serve_until_stopped(addr, &intake, &latencies, &sink, &cfg).await;
            Ok(())
        }
    };
    // Idle and stalled connections are closed too, within a second.
    server.shutdown().await;
    admin_server.shutdown().await;
    if mode == Mode::Demo
        && let Some(dir) = &journal_dir
    {
        drop((queue, intake));
        let _ = std::fs::remove_dir_all(dir);
    }
    outcome.map_err(Failure::Run)
}

/// `dir` made if missing, private (0700) as the journal makes it.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// A listener on `addr` (the setting `key`), and the address it got.
async fn bind(
    addr: SocketAddr,
    key: &str,
) -> Result<(tokio::net::TcpListener, SocketAddr), String> {
    let tcp = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{key} {addr}: {e}"))?;
    let got = tcp.local_addr().map_err(|e| format!("{key} {addr}: {e}"))?;
    Ok((tcp, got))
}

/// The stable lines a starting relay prints: where it listens (tests and
/// scripts read `webhook relay on http://ADDR:`), and where it delivers.
fn announce(cfg: &Config, addr: SocketAddr) {
    let s = &cfg.settings;
    match &cfg.destinations[..] {
        [d] => println!(
            "webhook relay on http://{addr}: POST /v1/webhooks/deliver, GET /healthz\n\
             delivering to {} at {}/s, capacity {} ({:?} budget), overflow {:?}",
            d.url,
            d.rate.unwrap_or(s.drain_rate),
            queue::capacity(cfg, &d.name),
            d.budget.unwrap_or(s.latency_budget),
            s.overflow,
        ),
        all => println!(
            "webhook relay on http://{addr}: POST /v1/webhooks/deliver with {}: NAME, GET /healthz\n\
             {} destinations ({}), each at {}/s unless configured, {:?} budget, {} in flight each of {} shared",
            s.destination_header,
            all.len(),
            all.iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            s.drain_rate,
            s.latency_budget,
            s.per_destination_cap(all.len()),
            s.max_in_flight,
        ),
    }
}

/// Serves until Ctrl-C or SIGTERM, then drains (see `shutdown`).
async fn serve_until_stopped(
    addr: SocketAddr,
    intake: &Arc<Intake>,
    latencies: &Arc<Latencies>,
    sink: &FileSink,
    cfg: &Config,
) {
    println!(
        "try: curl -X POST -d '{{\"hello\":1}}' -H 'content-type: application/json' http://{addr}/v1/webhooks/deliver"
    );
    println!("or run with --demo; Ctrl-C drains the queue and exits");
    let status = admin::status::spawn(intake.clone(), latencies.clone());
    shutdown::signal().await;
    let grace = cfg.settings.shutdown_grace;
    println!("\nshutting down: refusing new webhooks, draining for up to {grace:?}");
    // The shared queue's drains stop and end what they hold first, so what
    // they dead-letter is in the file before it is flushed.
    #[cfg(feature = "redis")]
    if let Some(shared) = &intake.shared {
        shared.finish(grace).await;
    }
    // Deletions still draining end first (each within the grace), so what
    // they dead-letter is in the file before it is flushed.
    if tokio::time::timeout(grace, intake.catalog.finish())
        .await
        .is_err()
    {
        tracing::warn!(
            "a deleted destination was still draining at the end of the grace; the journal keeps what it held"
        );
    }
    let done = shutdown::drain_or_quit(&intake.set, sink, grace).await;
    status.abort();
    // Every end of the drain written beside the journal before exiting.
    let unwritten = intake.status.finish().await;
    if unwritten > 0 {
        println!("{unwritten} webhook statuses were not written (their file fell behind)");
    }
    println!(
        "delivered {}, kept in the journal for the next start {}, dead-letter file {} ({} lines this run)",
        done.delivered,
        done.kept,
        cfg.settings.dead_letter_file.display(),
        done.dead_letter_lines,
    );
    if done.dead_letter_held > 0 {
        let rest = match cfg.settings.no_journal {
            true => "lost: there is no journal",
            false => "their webhooks stay in the journal for the next start",
        };
        println!(
            "{} dead-letter lines could not be written ({rest})",
            done.dead_letter_held
        );
    }
}
