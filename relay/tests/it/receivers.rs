//! Receivers the tests deliver to, on loopback ports the system picks: one
//! that records every request (and answers as a test says), and one that
//! takes connections and never answers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

/// One request a receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Hit {
    /// Its `idempotency-key`.
    pub key: String,
    /// Its query (`d=a`: which destination sent it).
    pub query: String,
    /// Every header.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// When it arrived.
    pub at: Instant,
}

/// Every request, in arrival order.
#[derive(Default)]
pub(crate) struct Log {
    hits: Mutex<Vec<Hit>>,
    more: Notify,
}

impl Log {
    pub(crate) fn record(&self, uri: &Uri, headers: &HeaderMap, body: Bytes) -> (Hit, usize) {
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let hit = Hit {
            key: key.to_owned(),
            query: uri.query().unwrap_or_default().to_owned(),
            headers: headers.clone(),
            body,
            at: Instant::now(),
        };
        let mut hits = self.hits.lock().unwrap();
        let tries = hits.iter().filter(|h| h.key == hit.key).count() + 1;
        hits.push(hit.clone());
        (hit, tries)
    }

    /// Wakes waiters once a request has been answered.
    fn answered(&self) {
        self.more.notify_waiters();
    }

    /// Every request so far.
    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Requests so far, by idempotency key.
    pub(crate) fn keys(&self) -> HashMap<String, u32> {
        let mut keys = HashMap::new();
        for h in self.hits.lock().unwrap().iter() {
            *keys.entry(h.key.clone()).or_default() += 1;
        }
        keys
    }

    /// Requests so far.
    pub(crate) fn len(&self) -> usize {
        self.hits.lock().unwrap().len()
    }

    /// Waits until `done` holds over the hits, at most `limit`.
    pub(crate) async fn until(&self, limit: Duration, done: impl Fn(&[Hit]) -> bool) -> bool {
        let wait = async {
            loop {
                let more = self.more.notified();
                if done(&self.hits.lock().unwrap()) {
                    return;
                }
                more.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}

/// How a receiver answers a request, given the request and which try of
/// its key this is (1 = first).
pub(crate) type Answer = Arc<dyn Fn(&Hit, usize) -> Response + Send + Sync>;

/// A receiver that records every request in `log`, waits `delay`, and
/// answers as `answer` says.
pub(crate) async fn recording(log: Arc<Log>, delay: Duration, answer: Answer) -> SocketAddr {
    serve(recording_app(log, delay, answer)).await
}

/// The routes of [`recording`], to serve on any transport.
pub(crate) fn recording_app(log: Arc<Log>, delay: Duration, answer: Answer) -> Router {
    Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let (log, answer) = (log.clone(), answer.clone());
        async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let (hit, tries) = log.record(&uri, &headers, body);
            let resp = answer(&hit, tries);
            log.answered();
            resp
        }
    })
}

/// A receiver answering 204 to everything after `delay`.
pub(crate) async fn ok(log: Arc<Log>, delay: Duration) -> SocketAddr {
    recording(
        log,
        delay,
        Arc::new(|_: &Hit, _| StatusCode::NO_CONTENT.into_response()),
    )
    .await
}

/// Serves `app` on a free loopback port.
pub(crate) async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A receiver that accepts connections and never answers.
pub(crate) async fn dead() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream); // never read, never answered, never closed
        }
    });
    addr
}
