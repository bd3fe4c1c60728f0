//! The intake listener: a small accept loop over HTTP/1.1 connections
//! (hyper) that no client can hold forever.
//!
//! - A request head must arrive within `header_read_timeout` (hyper's
//!   timer closes the connection otherwise) and fit in [`MAX_HEAD`]
//!   bytes (431 past it); a body within `body_read_timeout` (intake
//!   answers 408).
//! - At most `max_connections` are served at once: past it a connection is
//!   answered 503 with a problem body and closed by a small task of its
//!   own (at most [`REFUSERS`] at once, else closed at once), so the accept
//!   loop never waits on a client.
//! - [`Listener::shutdown`] stops accepting, asks each connection to close
//!   once its request is answered (idle ones close at once), and after
//!   [`CLOSE_WAIT`] closes whatever is left (stalled heads and bodies).
//! - Each connection's bytes are scanned for heads with both framing
//!   headers ([`framing`]).
//! - With a certificate ([`crate::tls::server`]) it speaks TLS: the handshake must end
//!   within `header_read_timeout` and holds a connection slot from its
//!   accept; a connection past the limit is closed without an answer (a
//!   plain-text 503 means nothing to a TLS client).

pub(crate) mod app;
pub(crate) mod closing;
pub(crate) mod framing;

use std::sync::Arc;
use std::time::Duration;

use app::App;
use framing::{Framing, Scanned};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::telemetry;

/// The largest request head read, bytes (hyper's buffer per connection).
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// How long shutdown lets connections finish their answers before
/// closing them.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Connections past the limit being answered 503 at once; more are closed
/// without an answer.
pub(crate) const REFUSERS: usize = 64;

/// The answer to a connection past the limit.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/problem+json\r\nretry-after: 1\r\nconnection: close\r\n\
content-length: 157\r\n\r\n\
{\"type\":\"urn:dripfeed:problem:too-many-connections\",\"title\":\"Service Unavailable\",\"status\":503,\"detail\":\"the relay serves its most connections; retry later\"}";

/// Limits on what clients may hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a request head may take to arrive.
    pub header_read_timeout: Duration,
    /// The `listener` label of its connection metrics: `intake` or `admin`.
    pub label: &'static str,
}

/// Where the connections are in shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Serving,
    Closing,
    Closed,
}

/// A running listener.
pub(crate) struct Listener {
    phase: watch::Sender<Phase>,
    slots: Arc<Semaphore>,
    max: u32,
    accept: tokio::task::JoinHandle<()>,
}

/// The process's limit on open files, where the system says (Linux).
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Starts serving `app` (a router, or an [`App`] with a direct route) on
/// `listener` within `limits`, over TLS with `tls`.
pub(crate) fn spawn(
    listener: TcpListener,
    app: impl Into<App>,
    limits: Limits,
    tls: Option<TlsAcceptor>,
) -> Listener {
    let app = app.into();
    if let Some(files) = open_file_limit()
        && (limits.max_connections as u64).saturating_add(64) > files
    {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files = files,
            "max_connections is near or above the open-file limit: connections past it fail to be accepted (raise the limit, or lower max_connections)"
        );
    }
    let max =
        u32::try_from(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
    let slots = Arc::new(Semaphore::new(max as usize));
    let (phase, watching) = watch::channel(Phase::Serving);
    let accept = tokio::spawn(accept_loop(
        listener,
        app,
        limits,
        tls,
        slots.clone(),
        watching,
    ));
    Listener {
        phase,
        slots,
        max,
        accept,
    }
}

impl Listener {
    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        (self.max as usize).saturating_sub(self.slots.available_permits())
    }

    /// Stops accepting, lets connections finish their answers for up to
    /// [`CLOSE_WAIT`], then closes the rest; returns once all are closed.
    pub(crate) async fn shutdown(self) {
        let _ = self.phase.send(Phase::Closing);
        let all_closed = || self.slots.acquire_many(self.max);
        if tokio::time::timeout(CLOSE_WAIT, all_closed())
            .await
            .is_err()
        {
            tracing::info!(
                open = self.open(),
                "closing connections still open after the shutdown's wait"
            );
            let _ = self.phase.send(Phase::Closed);
            let _ = tokio::time::timeout(CLOSE_WAIT, all_closed()).await;
        }
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    app: App,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    slots: Arc<Semaphore>,
    mut phase: watch::Receiver<Phase>,
) {
    let refusers = Arc::new(Semaphore::new(REFUSERS));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = phase.changed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, mostly: wait for some to close.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics::counter!(telemetry::CONNECTIONS_REFUSED, "listener" => limits.label)
                .increment(1);
            if tls.is_none() {
                refuse(stream, &refusers);
            }
            continue;
        };
        let open = metrics::gauge!(telemetry::CONNECTIONS, "listener" => limits.label);
        open.increment(1.0);
        let held = Held {
            _slot: slot,
            _open: Open(open),
        };
        let (app, http, phase) = (app.clone(), http.clone(), phase.clone());
        match &tls {
            None => {
                tokio::spawn(serve(stream, app, http, phase, held));
            }
            Some(acceptor) => {
                let (acceptor, within) = (acceptor.clone(), limits.header_read_timeout);
                tokio::spawn(async move {
                    // A handshake is part of the head: within its time.
                    match tokio::time::timeout(within, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve(tls, app, http, phase, held).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "a TLS handshake failed"),
                        Err(_) => {
                            tracing::debug!("a TLS handshake took longer than header_read_timeout")
                        }
                    }
                });
            }
        }
    }
}

/// What a connection holds while it is served: its slot in
/// `max_connections` and its count in the open gauge.
struct Held {
    _slot: OwnedSemaphorePermit,
    _open: Open,
}

/// Serves `app` on one connection until it ends or shutdown closes it.
async fn serve<S>(
    io: S,
    app: App,
    http: hyper::server::conn::http1::Builder,
    mut phase: watch::Receiver<Phase>,
    held: Held,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _held = held;
    let framing = Framing::default();
    let scanned = Scanned::new(io, framing.clone());
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(framing.clone());
        app.call(req.map(axum::body::Body::new))
    });
    let conn = http.serve_connection(TokioIo::new(scanned), service);
    let mut conn = std::pin::pin!(conn);
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            changed = phase.changed() => {
                let now = *phase.borrow_and_update();
                match (changed, now) {
                    (Err(_), _) | (_, Phase::Closed) => return,
                    (_, Phase::Closing) => conn.as_mut().graceful_shutdown(),
                    (_, Phase::Serving) => {}
                }
            }
        }
    }
}

/// Counts a connection out of the open gauge when its task ends, however
/// it ends.
struct Open(metrics::Gauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Answers a connection past the limit 503 and closes it, reading (and
/// dropping) what the client sent for a moment so the answer is not lost
/// to a reset; without a free refuser, closes it at once.
fn refuse(stream: TcpStream, refusers: &Arc<Semaphore>) {
    let Ok(refuser) = refusers.clone().try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        let _refuser = refuser;
        let mut stream = stream;
        let answer = async {
            stream.write_all(REFUSAL).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<(), std::io::Error>(())
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_says_its_length() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let problem: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(problem["status"], 503);
    }
}
