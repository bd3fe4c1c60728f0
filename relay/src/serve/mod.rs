//! Running the relay: from a checked configuration to a listening server,
//! in order — the admin API's changes over the configuration (the state
//! file, or the fleet's map), the demo's receivers (only for a demo), the
//! checks every destination goes through, the metrics recorder, the HTTP
//! client and the tenant store, then the queue (this is where the engine is
//! picked: the local one, or the fleet's with `queue = redis`), the
//! listeners (their addresses printed in stable lines), an optional
//! redrive, and the mode: serve until a signal, or a demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::auth::tenants::Tenants;
use crate::catalog::Catalog;
use crate::config::value::QueueKind;
use crate::config::{Config, ConfigError, ConfigErrors, DEFAULT_NAME, Origin};
use crate::dead_letter::redrive;
use crate::deliver::latency::Latencies;
use crate::domain::budget::ByteBudget;
use crate::domain::limits::Limits;
use crate::intake::{Answers, Intake};
use crate::queue::{self, quotas};
use crate::util::swap::Swap;
use crate::{admin, deliver, demo, shutdown, telemetry};

mod demo_prep;
mod engine;
pub(crate) mod health;
mod listen;
mod local_prep;
pub(crate) mod openapi;
pub(crate) mod reload;

/// What the relay does once it listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
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
pub(crate) enum Failure {
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

/// Every check a destination goes through before the relay starts, for
/// the engine `cfg` picks: the library's template, each destination's
/// limits ([`Limits`]), the address guard, `ca_file`.
pub(crate) async fn check(cfg: &Config, guard: &deliver::guard::AddressGuard) -> Vec<ConfigError> {
    let mut errors = match cfg.settings.queue {
        QueueKind::Local => queue::local::build::check(cfg),
        QueueKind::Redis => queue::local::build::destination_errors(cfg, &Limits::fleet(cfg)),
    };
    errors.extend(deliver::guard::check_destinations(cfg, guard).await);
    errors.extend(crate::tls::client::check_ca_file(cfg));
    errors.extend(tls_errors(cfg));
    errors
}

/// The listeners' certificates, loaded: why each cannot be.
fn tls_errors(cfg: &Config) -> Vec<ConfigError> {
    let s = &cfg.settings;
    [
        (("tls_cert", "tls_key"), &s.tls_cert, &s.tls_key),
        (
            ("admin_tls_cert", "admin_tls_key"),
            &s.admin_tls_cert,
            &s.admin_tls_key,
        ),
    ]
    .into_iter()
    .filter_map(|((cert_name, key_name), cert, pem_key)| {
        let (Some(cert), Some(pem_key)) = (cert, pem_key) else {
            return None;
        };
        let (fault, e) = crate::tls::server::load_blaming(cert, pem_key).err()?;
        // The setting whose file is at fault, where it was given (a flag,
        // a variable or a line of the file).
        let name = match fault {
            crate::tls::server::Fault::Cert => cert_name,
            crate::tls::server::Fault::Key => key_name,
        };
        Some(ConfigError::new(name, cfg.origin(name).cloned(), e))
    })
    .collect()
}

/// Where a reload reads the configuration again, and the SIGHUPs that ask
/// for one.
pub(crate) struct Reload {
    /// The flags the relay started with.
    pub flags: crate::config::SourceFlags,
    /// SIGHUP, handled from the process's start.
    pub hangups: crate::shutdown::Hangups,
}

/// Runs the relay with `cfg` in `mode`, first re-admitting `redrive`'s
/// dead letters if given; reloads on SIGHUP.
pub(crate) async fn run(
    mut cfg: Config,
    mode: Mode,
    redrive_file: Option<PathBuf>,
    reload: Reload,
) -> Result<(), Failure> {
    // Files and directories the relay keeps are opened by this policy.
    crate::util::private::set_modes(match cfg.settings.file_modes {
        crate::config::value::ModePolicy::Fix => crate::util::private::FileModes::Fix,
        crate::config::value::ModePolicy::Refuse => crate::util::private::FileModes::Refuse,
        crate::config::value::ModePolicy::Warn => crate::util::private::FileModes::Warn,
    });
    // A demo has no graceful stop: Ctrl-C ends it at once.
    if mode != Mode::Serve {
        tokio::spawn(async {
            shutdown::signal().await;
            std::process::exit(130);
        });
    }
    // The configuration as given, before the admin API's changes: what a
    // reload compares the file with.
    let configured = cfg.clone();
    let prepared = engine::Prepared::changes(&mut cfg, mode).await?;
    let receiver = demo_prep::prepare(&mut cfg, mode, prepared.changed()).await?;
    let guard = Arc::new(deliver::guard::AddressGuard::from_config(&cfg));
    let mut errors = check(&cfg, &guard).await;
    prepared.excuse(&mut cfg, &mut errors);
    if !errors.is_empty() {
        return Err(Failure::Config(ConfigErrors(errors)));
    }
    let [intake_certs, admin_certs] = listen::certs(&cfg).map_err(Failure::Run)?;
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
        prepared.check_redrive(path, &cfg)?;
    }
    let prometheus = telemetry::install_prometheus()?;
    let latencies = Arc::new(Latencies::default());
    let tenant_store = quotas::open(&cfg).await?;
    let stores: Vec<_> = tenant_store.iter().filter_map(|(_, c)| c.clone()).collect();
    let quota_store = tenant_store.as_ref().map(|(store, _)| store.clone());
    let keyed = quota_store.is_some();
    if let Some(store) = &quota_store {
        quotas::set_overrides_when_up(store.clone(), &cfg).await;
    }
    let catalog = Arc::new(Catalog::new(&cfg.destinations));
    let budget = ByteBudget::new(s.max_queue_bytes);
    // The relay's own tenant table holds names too: its bound is reserved.
    let _tenant_table = match quotas::local(&cfg) {
        true => Some(budget.try_hold(quotas::LOCAL_TABLE_BYTES).ok_or_else(|| {
            refused(
                "max_queue_bytes",
                cfg.origin("max_queue_bytes").cloned(),
                format!(
                    "with tenant quotas in this relay's memory it must be above {} (its tenant table's bound)",
                    quotas::LOCAL_TABLE_BYTES
                ),
            )
        })?),
        false => None,
    };
    let client = deliver::client::client(s, s.max_in_flight, guard.clone())?;
    let status = prepared.statuses(&cfg);
    let errors = Arc::new(deliver::errors::Errors::default());
    let recents = Arc::new(deliver::recent::Recents::default());
    let traces = crate::trace::start(s)
        .map_err(|e| refused("otlp_endpoint", cfg.origin("otlp_endpoint").cloned(), e))?
        .map(Arc::new);
    let deliveries = Arc::new(deliver::deliveries::Deliveries {
        client,
        targets: catalog.clone(),
        latencies: latencies.clone(),
        guard: guard.clone(),
        status: status.clone(),
        errors: errors.clone(),
        recents: recents.clone(),
        traces: traces.clone(),
        retries: s.retries,
        retry_max: s.retry_max,
    });
    let fleet_mode = prepared.is_fleet();
    let origin = prepared.origin();
    let parts = engine::Parts {
        catalog: catalog.clone(),
        deliveries,
        guard: guard.clone(),
        quotas: quota_store.clone(),
        stores,
        budget: budget.clone(),
        status: status.clone(),
    };
    let engine::Engine {
        queue,
        local,
        journal_dir,
    } = prepared.open(&cfg, mode, parts).await?;
    let intake = Arc::new(Intake {
        queue: queue.clone(),
        catalog: catalog.clone(),
        destination_header: s.destination_header.clone(),
        tenant_header: s.tenant_header.clone(),
        tenants: Tenants::new(&cfg).map(Swap::new),
        keyed,
        budget,
        answers: Answers::default(),
        max_body_bytes: s.max_body_bytes,
        body_read_timeout: s.body_read_timeout,
        traces: traces.clone(),
    });
    let admin = Arc::new(admin::Admin {
        intake: intake.clone(),
        queue: queue.clone(),
        prometheus,
        token: Swap::new(s.admin_token_sha256),
        catalog: catalog.clone(),
        defaults: admin::destinations::Defaults::of(&cfg),
        vetter: crate::catalog::vet::Vetter {
            origin,
            guard: guard.clone(),
            resolve: s.resolve_destinations_at_start,
        },
        errors,
        recents,
        target_p99: s.adaptive.then_some(s.target_p99),
        metrics_busiest: s.metrics_busiest,
        fleet: fleet_mode,
        session: admin::page::session::Session::new(s.admin_listen.port(), admin_certs.is_some())?,
    });
    let reloader = Arc::new(reload::Reloader {
        flags: reload.flags,
        running: tokio::sync::Mutex::new(configured),
        intake: intake.clone(),
        admin: admin.clone(),
        queue: queue.clone(),
        guard: guard.clone(),
        certs: [intake_certs.clone(), admin_certs.clone()],
        status,
        quotas: quota_store,
    });
    let listening = listen::start(
        &cfg,
        intake.clone(),
        admin,
        [&intake_certs, &admin_certs],
        fleet_mode,
    )
    .await?;
    let addr = listening.addr;
    if mode == Mode::Serve {
        reloader.spawn(reload.hangups);
        // Serving, and SIGHUP reloads: systemd may send one from now on.
        crate::util::notify::ready();
    }
    if let (Some(path), Some(local)) = (&redrive_file, &local) {
        let done = local.redrive_file(path).await?;
        say!(
            "redrive {}: {} re-admitted, {} sent again since, {} refused, {} for destinations no longer there, {} unreadable lines, {} redriven before, {} kept in {}",
            path.display(),
            done.readmitted,
            done.settled,
            done.refused,
            done.gone,
            done.unreadable,
            done.already,
            done.kept,
            redrive::rest_of(path).display()
        );
    }
    let line = try_line(addr, &cfg);
    if mode == Mode::Serve {
        // The catalog holds the destinations from here: the configuration's
        // copies (those the admin API made among them) would be a second
        // copy of each for as long as the relay runs, about 1 KiB each.
        cfg.destinations = Vec::new();
    }
    let mut stop_by = None;
    let outcome = match (mode, &local) {
        (Mode::Demo, Some(local)) => {
            let name = cfg
                .destinations
                .first()
                .map_or(DEFAULT_NAME, |d| d.name.as_str());
            demo::run(demo::Demo {
                addr,
                set: &local.set,
                name,
                sink: &local.sink,
                tenants: keyed,
                receiver: receiver.as_deref(),
                grace: s.shutdown_grace,
            })
            .await
        }
        (Mode::DemoFanout, Some(local)) => {
            let cap = s.per_destination_cap(cfg.destinations.len());
            demo::fanout::run(addr, &local.set, &s.destination_header, cap, 10).await
        }
        _ => {
            let end = serve_until_stopped(&line, &intake, &latencies, &cfg).await;
            stop_by = Some(end);
            Ok(())
        }
    };
    // Idle and stalled connections are closed too, both listeners at once,
    // by the end serving until stopped left (AFTER_GRACE past the grace).
    listening
        .close(stop_by.unwrap_or_else(|| tokio::time::Instant::now() + AFTER_GRACE))
        .await;
    if mode != Mode::Serve {
        // Its writers ended first (the queue holds the dead-letter file's).
        drop((local, queue, intake));
        if mode == Mode::Demo
            && let Some(dir) = &journal_dir
        {
            let _ = std::fs::remove_dir_all(dir);
        }
        // A demo's own directory (its dead letters), when it chose one.
        if cfg.paths.data_dir == demo_prep::own_dir() {
            let _ = std::fs::remove_dir_all(&cfg.paths.data_dir);
        }
    }
    outcome.map_err(Failure::Run)
}

/// What a stop may take past `shutdown_grace` to close the listeners and
/// flush the last traces; with the runtime's own end (`main`) the process
/// exits within the grace and a second.
pub(crate) const AFTER_GRACE: std::time::Duration = std::time::Duration::from_millis(700);

/// The start's hint: a request that works against this configuration
/// (its scheme, a key when tenants need one, a destination when there are
/// several), and `--demo` only where it would run.
fn try_line(addr: SocketAddr, cfg: &Config) -> String {
    let scheme = if cfg.settings.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    if cfg.destinations.is_empty() {
        return "try: PUT /v1/applications/acme on the admin API above, then its endpoints \
                (PUT /v1/applications/acme/endpoints/NAME); Ctrl-C drains the queue and exits"
            .to_owned();
    }
    // A plain destination takes a webhook (by name among several); when
    // every one is an application's endpoint, the application takes an
    // event.
    let plain = cfg.destinations.iter().find(|d| d.endpoint.is_none());
    let webhook = r#"{"hello":1}"#;
    let (body, named, path) = match (plain, cfg.destinations.as_slice()) {
        (Some(_), [_]) => (webhook, None, "/v1/webhooks/deliver".to_owned()),
        (Some(first), _) => (
            webhook,
            Some(&first.name),
            "/v1/webhooks/deliver".to_owned(),
        ),
        (None, first) => {
            let app = first
                .first()
                .and_then(|d| d.endpoint.as_ref())
                .map_or("APP", |e| &*e.application);
            let event = r#"{"type":"hello.sent","payload":{"hello":1}}"#;
            (event, None, format!("/v1/applications/{app}/events"))
        }
    };
    let mut curl = format!("try: curl -X POST -d '{body}' -H 'content-type: application/json'");
    if !cfg.tenants.is_empty() {
        curl.push_str(" -H \"Authorization: Bearer $KEY\"");
    }
    if let Some(name) = named {
        curl.push_str(&format!(
            " -H '{}: {name}'",
            cfg.settings.destination_header
        ));
    }
    if scheme == "https" {
        curl.push_str(" --cacert CA.pem");
    }
    curl.push_str(&format!(" {scheme}://{addr}{path}"));
    if cfg.tenants.is_empty() {
        curl.push_str("\nor run with --demo; Ctrl-C drains the queue and exits");
    } else {
        curl.push_str("\nCtrl-C drains the queue and exits");
    }
    curl
}

/// Serves until Ctrl-C or SIGTERM, then drains (see `shutdown`); when the
/// rest of the stop must be done by (the grace and [`AFTER_GRACE`] from
/// the signal).
async fn serve_until_stopped(
    try_line: &str,
    intake: &Arc<Intake>,
    latencies: &Arc<Latencies>,
    cfg: &Config,
) -> tokio::time::Instant {
    say!("{try_line}");
    let show = admin::status::Show::choose(cfg.settings.status_line);
    let status = admin::status::spawn(intake.clone(), latencies.clone(), show);
    shutdown::signal().await;
    let grace = cfg.settings.shutdown_grace;
    let end = tokio::time::Instant::now() + grace + AFTER_GRACE;
    // The drain's first step closes admission (no await before it): taken
    // before the line says new webhooks are refused, so a sender that
    // reads it and posts is refused (it could be answered 202 when this
    // thread lost the CPU between the line and the close).
    let drain = intake.queue.shutdown(grace);
    tokio::pin!(drain);
    let mut first = None;
    std::future::poll_fn(|cx| {
        first = Some(drain.as_mut().poll(cx));
        std::task::Poll::Ready(())
    })
    .await;
    say!("\nshutting down: refusing new webhooks, draining for up to {grace:?}");
    crate::util::notify::stopping();
    let done = match first {
        Some(std::task::Poll::Ready(done)) => done,
        _ => shutdown::or_quit(drain).await,
    };
    status.abort();
    if let Some(traces) = &intake.traces {
        // Half of what is left: the listeners close in the rest.
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        traces.flush(left / 2).await;
    }
    if done.statuses_unwritten > 0 {
        say!(
            "{} webhook statuses were not written (their file fell behind)",
            done.statuses_unwritten
        );
    }
    match cfg.settings.queue {
        // The fleet keeps what is left in Redis (other relays deliver
        // it), and its dead letters there too.
        crate::config::value::QueueKind::Redis => say!(
            "delivered {} (what is left stays in the fleet's queue, for the other relays or the next start)",
            done.delivered,
        ),
        crate::config::value::QueueKind::Local => say!(
            "delivered {}, kept in the journal for the next start {}, dead-letter file {} ({} lines this run)",
            done.delivered,
            done.kept,
            cfg.paths.dead_letter_file.display(),
            done.dead_letter_lines,
        ),
    }
    if done.dead_letter_held > 0 {
        let rest = match cfg.settings.no_journal {
            true => "lost: there is no journal",
            false => "their webhooks stay in the journal for the next start",
        };
        say!(
            "{} dead-letter lines could not be written ({rest})",
            done.dead_letter_held
        );
    }
    end
}

#[cfg(test)]
mod tests {
    use super::try_line;
    use crate::config::tests::load_with;

    /// The start's hint is a request that works: a webhook to the one
    /// destination, by name to a plain one among several, and an event to
    /// the application when every destination is one of its endpoints.
    #[test]
    fn the_hint_is_a_request_this_configuration_takes() {
        let addr = "127.0.0.1:8080".parse().unwrap();
        let line = |argv: &[&str], file: Option<&str>| {
            try_line(addr, &load_with(argv, &[], file).unwrap())
        };
        let one = line(&["--downstream", "http://127.0.0.1:9/x"], None);
        assert!(
            one.contains("http://127.0.0.1:8080/v1/webhooks/deliver")
                && !one.contains("X-Destination"),
            "{one}"
        );
        let endpoint = "[[destinations]]\nname = \"e-one\"\nurl = \"http://127.0.0.1:9/e\"\napplication = \"acme\"\n";
        let plain = "[[destinations]]\nname = \"plain\"\nurl = \"http://127.0.0.1:9/p\"\n";
        let mixed = line(&[], Some(&format!("{endpoint}{plain}")));
        assert!(
            mixed.contains("X-Destination: plain'") && mixed.contains("/v1/webhooks/deliver"),
            "{mixed}"
        );
        let events = line(&[], Some(endpoint));
        assert!(
            events.contains("/v1/applications/acme/events")
                && events.contains("\"type\":\"hello.sent\""),
            "{events}"
        );
        assert!(!events.contains("X-Destination"), "{events}");
    }
}
