//! The chaos run's receiver: it flaps between answering at once, slowly
//! (within the deliver timeout), 500, 429 with `Retry-After: 1`, and not
//! in time (3 s, past the deliver timeout, then 503), as the run says; it
//! logs every request as it arrives: the webhook's id (its
//! `idempotency-key`), the client's number (the body's `n`), when, and
//! whether it was answered 2xx (delivered).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::receivers::serve;

/// How the receiver answers now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Ok = 0,
    Slow = 1,
    Fail = 2,
    TooMany = 3,
    Down = 4,
}

impl Mode {
    pub(super) const ALL: [Mode; 5] = [Mode::Ok, Mode::Slow, Mode::Fail, Mode::TooMany, Mode::Down];

    fn of(n: u8) -> Mode {
        Mode::ALL.get(usize::from(n)).copied().unwrap_or(Mode::Ok)
    }
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub(super) struct Arrival {
    /// The webhook's id.
    pub id: String,
    /// The client's number for it (the body's `n`).
    pub n: Option<u64>,
    pub at: Instant,
    /// Answered 2xx (in time: the slow answer is well within the timeout).
    pub ok: bool,
}

/// A running receiver.
#[derive(Clone)]
pub(super) struct Flapping {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    log: Arc<Mutex<Vec<Arrival>>>,
}

impl Flapping {
    /// Starts the receiver on a thread and runtime of its own: what the
    /// test does meanwhile (a blocking wait for a failover, starting a
    /// relay) never stalls it, so its per-second counts are the relays'.
    pub(super) async fn start() -> Flapping {
        let mode = Arc::new(AtomicU8::new(Mode::Ok as u8));
        let log: Arc<Mutex<Vec<Arrival>>> = Arc::default();
        let (m, l) = (mode.clone(), log.clone());
        let app = Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let (mode, log) = (Mode::of(m.load(Ordering::Relaxed)), l.clone());
            async move { answer(mode, &log, &headers, &body).await }
        });
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the receiver's runtime");
            runtime.block_on(async move {
                let _ = tx.send(serve(app).await);
                std::future::pending::<()>().await;
            });
        });
        Flapping {
            addr: rx.await.expect("the receiver listens"),
            mode,
            log,
        }
    }

    pub(super) fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    #[cfg(feature = "redis")]
    pub(super) fn mode(&self) -> Mode {
        Mode::of(self.mode.load(Ordering::Relaxed))
    }

    pub(super) fn arrivals(&self) -> Vec<Arrival> {
        self.log.lock().unwrap().clone()
    }
}

async fn answer(
    mode: Mode,
    log: &Mutex<Vec<Arrival>>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let id = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let n = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["n"].as_u64());
    let ok = matches!(mode, Mode::Ok | Mode::Slow);
    log.lock().unwrap().push(Arrival {
        id,
        n,
        at: Instant::now(),
        ok,
    });
    match mode {
        Mode::Ok => StatusCode::NO_CONTENT.into_response(),
        Mode::Slow => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            StatusCode::NO_CONTENT.into_response()
        }
        Mode::Fail => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Mode::TooMany => {
            let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            r
        }
        Mode::Down => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}
