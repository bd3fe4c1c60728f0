//! The listeners: intake and admin bound, served (with their
//! certificates, when they have them) and announced in the stable lines a
//! starting relay prints (tests and scripts read `webhook relay on
//! http://ADDR:`), then closed together at the stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::Failure;
use crate::admin::{self, Admin};
use crate::config::Config;
use crate::domain::limits::Limits;
use crate::intake::{self, Intake};
use crate::listener::{self, Listener};
use crate::tls::server::Certs;

/// Both listeners, serving.
pub(super) struct Listening {
    /// Where intake listens.
    pub(super) addr: SocketAddr,
    server: Listener,
    admin: Listener,
}

impl Listening {
    /// Closes both, idle and stalled connections too, by `end` at most.
    pub(super) async fn close(self, end: tokio::time::Instant) {
        let close = async {
            tokio::join!(self.server.shutdown(), self.admin.shutdown());
        };
        if tokio::time::timeout_at(end, close).await.is_err() {
            tracing::info!("connections still open past the grace: closed");
        }
    }
}

/// Binds and serves intake and the admin listener (`certs`: intake's, the
/// admin listener's), and prints where.
pub(super) async fn start(
    cfg: &Config,
    intake: Arc<Intake>,
    admin: Arc<Admin>,
    certs: [&Option<Arc<Certs>>; 2],
    fleet: bool,
) -> Result<Listening, Failure> {
    let s = &cfg.settings;
    let limits = listener::Limits {
        max_connections: s.max_connections,
        header_read_timeout: s.header_read_timeout,
        label: "intake",
    };
    let (admin_tcp, admin_addr) = bind(s.admin_listen, "admin_listen").await?;
    let (tcp, addr) = bind(s.listen, "listen").await?;
    let acceptor = |certs: &Option<Arc<Certs>>| match certs {
        Some(c) => c.acceptor().map(Some).map_err(Failure::Run),
        None => Ok(None),
    };
    let admin_listener = listener::spawn(
        admin_tcp,
        admin::router(admin),
        listener::Limits {
            label: "admin",
            ..limits
        },
        acceptor(certs[1])?,
    );
    let app =
        listener::app::App::with_direct(intake::router(intake.clone()), intake::direct(intake));
    let server = listener::spawn(tcp, app, limits, acceptor(certs[0])?);
    tracing::info!(%addr, %admin_addr, destinations = cfg.destinations.len(), "listening");
    say!(
        "admin on {}://{admin_addr}: GET /metrics, /healthz, /readyz, /v1/destinations{}",
        scheme(certs[1]),
        match s.admin_token_sha256 {
            Some(_) => " (the last with the admin token)",
            None => " (no admin token: loopback only)",
        }
    );
    announce(cfg, addr, fleet, scheme(certs[0]));
    Ok(Listening {
        addr,
        server,
        admin: admin_listener,
    })
}

/// The listeners' certificates (`None` for one without TLS).
pub(super) fn certs(cfg: &Config) -> Result<[Option<Arc<Certs>>; 2], String> {
    let s = &cfg.settings;
    let open = |cert: &Option<PathBuf>, key: &Option<PathBuf>| match (cert, key) {
        (Some(cert), Some(key)) => Certs::open(cert, key).map(Some),
        _ => Ok(None),
    };
    Ok([
        open(&s.tls_cert, &s.tls_key)?,
        open(&s.admin_tls_cert, &s.admin_tls_key)?,
    ])
}

/// `https` for a listener with a certificate, else `http`.
fn scheme(certs: &Option<Arc<Certs>>) -> &'static str {
    match certs {
        Some(_) => "https",
        None => "http",
    }
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
fn announce(cfg: &Config, addr: SocketAddr, fleet: bool, scheme: &str) {
    let s = &cfg.settings;
    let limits = match fleet {
        true => Limits::fleet(cfg),
        false => Limits::local(cfg),
    };
    match &cfg.destinations[..] {
        [] => say!(
            "webhook relay on {scheme}://{addr}: POST /v1/applications/APP/events, \
             POST /v1/webhooks/deliver with {}: NAME, GET /healthz\n\
             no destination yet: make applications and their endpoints (or destinations) \
             through the admin API",
            s.destination_header,
        ),
        [d] => say!(
            "webhook relay on {scheme}://{addr}: POST /v1/webhooks/deliver, GET /healthz\n\
             delivering to {} at {}/s, capacity {} ({:?} budget), overflow {}",
            d.url,
            d.rate.unwrap_or(s.drain_rate),
            limits.check(d).unwrap_or(0),
            d.budget.unwrap_or(s.latency_budget),
            crate::config::value::Value::show(&s.overflow).trim_matches('"'),
        ),
        all => say!(
            "webhook relay on {scheme}://{addr}: POST /v1/webhooks/deliver with {}: NAME, GET /healthz\n\
             {} destinations ({}), each at {}/s unless configured, {:?} budget, {} in flight each of {} shared",
            s.destination_header,
            all.len(),
            some_names(all.iter().map(|d| d.name.as_str()), BANNER_NAMES),
            s.drain_rate,
            s.latency_budget,
            s.per_destination_cap(all.len()),
            s.max_in_flight,
        ),
    }
}

/// Destinations the start banner names; the rest are counted.
const BANNER_NAMES: usize = 10;

/// The first `most` of `names`, comma-separated, and how many more: a
/// relay with a hundred thousand endpoints says so in one short line.
fn some_names<'a>(names: impl ExactSizeIterator<Item = &'a str>, most: usize) -> String {
    let more = names.len().saturating_sub(most);
    let shown = names.take(most).collect::<Vec<_>>().join(", ");
    match more {
        0 => shown,
        n => format!("{shown} and {n} more"),
    }
}

#[cfg(test)]
mod banner_tests {
    #[test]
    fn the_banner_names_a_few_destinations_and_counts_the_rest() {
        let names: Vec<String> = (0..50_000).map(|n| format!("endpoint-{n}")).collect();
        let line = super::some_names(names.iter().map(String::as_str), 3);
        assert_eq!(line, "endpoint-0, endpoint-1, endpoint-2 and 49997 more");
        assert_eq!(super::some_names(["a", "b"].into_iter(), 3), "a, b");
    }
}
