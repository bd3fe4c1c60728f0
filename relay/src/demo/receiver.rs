//! The built-in fragile receiver: serves `capacity` requests/s with low
//! latency; above that its backlog grows, latency climbs with it, and once
//! the backlog passes a quarter second some requests fail with 503.
//! `GET /stats` tells what it received.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::{get, post};
use serde::Serialize;
use tokio::time::Instant;

/// Latency when the receiver is under capacity.
const BASE_LATENCY: Duration = Duration::from_millis(2);
/// Backlog (seconds of work) past which requests start to fail.
const FAIL_AFTER: f64 = 0.25;

/// What the receiver saw.
#[derive(Default, Serialize, Clone, Copy, Debug)]
pub(crate) struct ReceiverStats {
    /// Requests received.
    pub received: u64,
    /// Answered 204.
    pub ok: u64,
    /// Answered 503 (over capacity).
    pub failed_503: u64,
}

/// The receiver's backlog, as a queue model.
struct Model {
    capacity: f64,
    /// Seconds of work queued, as of `last`.
    backlog: f64,
    last: Instant,
    rng: fastrand::Rng,
}

/// A receiver of `capacity` requests/s that degrades past it.
pub(crate) struct Receiver {
    model: Mutex<Model>,
    /// The `idempotency-key` of each webhook answered 2xx (the first million).
    keys: Mutex<HashSet<String>>,
    received: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
}

impl Receiver {
    /// A receiver taking `capacity` requests/s.
    pub(crate) fn new(capacity: f64) -> Arc<Self> {
        Arc::new(Receiver {
            model: Mutex::new(Model {
                capacity: capacity.max(1.0),
                backlog: 0.0,
                last: Instant::now(),
                rng: fastrand::Rng::with_seed(7),
            }),
            keys: Mutex::new(HashSet::new()),
            received: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// What it saw so far.
    pub(crate) fn stats(&self) -> ReceiverStats {
        ReceiverStats {
            received: self.received.load(Ordering::Relaxed),
            ok: self.ok.load(Ordering::Relaxed),
            failed_503: self.failed.load(Ordering::Relaxed),
        }
    }

    /// The idempotency keys of the webhooks answered 2xx.
    pub(crate) fn delivered_keys(&self) -> HashSet<String> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Admits one request into the queue model: its latency, and whether it fails.
    fn arrive(&self) -> (Duration, bool) {
        let mut m = self.model.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let elapsed = (now - m.last).as_secs_f64();
        m.last = now;
        m.backlog = (m.backlog - elapsed).max(0.0) + 1.0 / m.capacity;
        let fail_chance = ((m.backlog - FAIL_AFTER) / 1.0).clamp(0.0, 0.9);
        let fails = m.rng.f64() < fail_chance;
        (
            BASE_LATENCY + Duration::from_secs_f64(m.backlog.min(30.0)),
            fails,
        )
    }
}

async fn hook(
    State(rx): State<Arc<Receiver>>,
    headers: axum::http::HeaderMap,
    _body: axum::body::Bytes,
) -> impl IntoResponse {
    rx.received.fetch_add(1, Ordering::Relaxed);
    let (latency, fails) = rx.arrive();
    tokio::time::sleep(latency).await;
    if fails {
        rx.failed.fetch_add(1, Ordering::Relaxed);
        (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]).into_response()
    } else {
        rx.ok.fetch_add(1, Ordering::Relaxed);
        let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
        let mut keys = rx.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(key) = key.filter(|_| keys.len() < 1_000_000) {
            keys.insert(key.to_owned());
        }
        StatusCode::NO_CONTENT.into_response()
    }
}

async fn stats(State(rx): State<Arc<Receiver>>) -> Json<ReceiverStats> {
    Json(rx.stats())
}

/// Serves the receiver on `addr` (any path takes a POST); returns its address.
pub(crate) async fn serve(
    addr: SocketAddr,
    receiver: Arc<Receiver>,
) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/stats", get(stats))
        .fallback(post(hook))
        .layer(axum::extract::DefaultBodyLimit::max(2 << 20))
        .with_state(receiver);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(local)
}
