//! A partner API with a strict quota: a GCRA allowing `quota` requests per
//! second with a burst of `burst`; above it, 429 with `Retry-After` (and the
//! `RateLimit` fields) when `hints` is on. Counts what it answered.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::time::Instant;

pub(crate) struct Partner {
    /// Theoretical arrival time of the next conforming request.
    tat: Mutex<Option<Instant>>,
    interval: Duration,
    tolerance: Duration,
    hints: bool,
    pub ok: AtomicU64,
    pub limited: AtomicU64,
}

impl Partner {
    pub(crate) fn new(quota: f64, burst: u32, hints: bool) -> Arc<Self> {
        let interval = Duration::from_secs_f64(1.0 / quota.max(0.001));
        Arc::new(Partner {
            tat: Mutex::new(None),
            interval,
            tolerance: interval * burst.saturating_sub(1),
            hints,
            ok: AtomicU64::new(0),
            limited: AtomicU64::new(0),
        })
    }

    /// `Ok(())` if a request now conforms, else how long until one would.
    fn admit(&self) -> Result<(), Duration> {
        let now = Instant::now();
        let mut tat = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        let t = tat.unwrap_or(now).max(now);
        if t - now > self.tolerance {
            return Err(t - now - self.tolerance);
        }
        *tat = Some(t + self.interval);
        Ok(())
    }
}

async fn handle(State(p): State<Arc<Partner>>) -> Response {
    match p.admit() {
        Ok(()) => {
            p.ok.fetch_add(1, Ordering::Relaxed);
            (StatusCode::OK, "{\"ok\":true}").into_response()
        }
        Err(wait) => {
            p.limited.fetch_add(1, Ordering::Relaxed);
            let mut resp = StatusCode::TOO_MANY_REQUESTS.into_response();
            if p.hints {
                let secs = dripfeed::headers::retry_after(wait);
                let h = resp.headers_mut();
                if let Ok(v) = secs.parse() {
                    h.insert("retry-after", v);
                }
                if let Ok(v) = format!("\"partner\";r=0;t={secs}").parse() {
                    h.insert("ratelimit", v);
                }
            }
            resp
        }
    }
}

/// Serves the partner on `addr`; returns its address.
pub(crate) async fn serve(addr: SocketAddr, partner: Arc<Partner>) -> std::io::Result<SocketAddr> {
    let app = Router::new().fallback(get(handle)).with_state(partner);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(local)
}
