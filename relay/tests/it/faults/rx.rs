//! The suite's receiver: one loopback server whose answer follows a
//! [`Plan`] (per webhook number and try), and which counts a webhook
//! delivered only when it answered 2xx within the deliver timeout, after
//! its delay. A hanging receiver is `receivers::dead`; one that closes the
//! connection on a webhook's first try is a raw listener here (hyper
//! always answers).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::scenario::DELIVER_TIMEOUT;
use crate::receivers;

/// How the receiver answers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Plan {
    /// 204 at once.
    Ok,
    /// 204 after 400 ms (below the deliver timeout).
    Slow,
    /// 204 after 1.5 s (past the deliver timeout: never in time).
    Late,
    /// Webhooks numbered 0 mod 3: 500 always; the others 500 on the first
    /// try, then 204.
    Fail5xx,
    /// 429 with `Retry-After: 1` on the first try, then 204.
    TooMany,
    /// 301, 302, 303, 307 or 308 (by number) with a `Location` at
    /// `/elsewhere`, which would answer 204 (and count it followed).
    Redirect,
    /// Webhooks numbered 0 mod 3: 400 (final: dead-lettered at once); the
    /// others 204.
    Refuse,
    /// 204 at once while the gate is open; while it is shut, 204 after
    /// 5 s (each try times out). Webhook 0 is always answered after 5 s:
    /// it stays unfinished for a few seconds (its tries time out).
    Gated,
    /// Never answers (`receivers::dead`).
    Hang,
    /// Closes the connection unanswered on each webhook's first try, 204
    /// after.
    Close,
}

/// A running receiver.
#[derive(Clone)]
pub(super) struct Rx {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The idempotency keys it answered 2xx in time.
    took: Arc<Mutex<HashSet<String>>>,
    /// Tries per key.
    tries: Arc<Mutex<HashMap<String, usize>>>,
    /// For [`Plan::Gated`]: open (answers at once) or shut.
    gate: Arc<AtomicBool>,
    /// Requests that followed a redirect to `/elsewhere`.
    followed: Arc<AtomicU64>,
}

impl Rx {
    /// Starts a receiver answering as `plan` says.
    pub(super) async fn start(plan: Plan) -> Rx {
        let mut rx = Rx {
            addr: ([127, 0, 0, 1], 0).into(),
            took: Arc::default(),
            tries: Arc::default(),
            gate: Arc::new(AtomicBool::new(true)),
            followed: Arc::default(),
        };
        rx.addr = match plan {
            Plan::Hang => receivers::dead().await,
            Plan::Close => rx.clone().closing().await,
            _ => receivers::serve(rx.app(plan)).await,
        };
        rx
    }

    /// The URL to deliver to.
    pub(super) fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    /// The keys answered 2xx in time so far.
    pub(super) fn delivered(&self) -> HashSet<String> {
        self.took.lock().unwrap().clone()
    }

    /// Requests that followed a redirect (a followed redirect is answered
    /// 204 there and never counts as delivered).
    pub(super) fn followed(&self) -> u64 {
        self.followed.load(Ordering::Relaxed)
    }

    /// Opens or shuts the gate of a [`Plan::Gated`] receiver.
    pub(super) fn open(&self, open: bool) {
        self.gate.store(open, Ordering::Relaxed);
    }

    /// Counts a try of `key`; which one this is (1 = first).
    fn tried(&self, key: &str) -> usize {
        let mut tries = self.tries.lock().unwrap();
        let n = tries.entry(key.to_owned()).or_default();
        *n += 1;
        *n
    }

    /// The routes of a receiver answering as `plan` says.
    fn app(&self, plan: Plan) -> Router {
        let rx = self.clone();
        Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let rx = rx.clone();
            async move {
                if uri.path() == "/elsewhere" {
                    rx.followed.fetch_add(1, Ordering::Relaxed);
                    return StatusCode::NO_CONTENT.into_response();
                }
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let try_n = rx.tried(&key);
                let n = number(&body);
                let (delay, resp) = rx.answer(plan, n, try_n);
                tokio::time::sleep(delay).await;
                if resp.status().is_success() && delay < DELIVER_TIMEOUT {
                    rx.took.lock().unwrap().insert(key);
                }
                resp
            }
        })
    }

    /// The delay and answer for try `try_n` of webhook `n`.
    fn answer(&self, plan: Plan, n: u64, try_n: usize) -> (Duration, Response) {
        let ok = || StatusCode::NO_CONTENT.into_response();
        let status = |s: u16| StatusCode::from_u16(s).unwrap().into_response();
        let now = Duration::ZERO;
        match plan {
            Plan::Ok => (now, ok()),
            Plan::Slow => (Duration::from_millis(400), ok()),
            Plan::Late => (Duration::from_millis(1500), ok()),
            Plan::Fail5xx if n.is_multiple_of(3) || try_n == 1 => (now, status(500)),
            Plan::TooMany if try_n == 1 => {
                let resp = (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]);
                (now, resp.into_response())
            }
            Plan::Redirect => {
                let code = [301, 302, 303, 307, 308][(n % 5) as usize];
                let code = StatusCode::from_u16(code).unwrap();
                (now, (code, [("location", "/elsewhere")]).into_response())
            }
            Plan::Refuse if n.is_multiple_of(3) => (now, status(400)),
            Plan::Gated if n == 0 || !self.gate.load(Ordering::Relaxed) => {
                (Duration::from_secs(5), ok())
            }
            _ => (now, ok()),
        }
    }

    /// A raw listener for [`Plan::Close`].
    async fn closing(self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(self.clone().close_first(stream));
            }
        });
        addr
    }

    /// Reads one request from `s`: closes it unanswered on its key's first
    /// try, answers 204 (and closes) after.
    async fn close_first(self, mut s: TcpStream) {
        let Some((key, _)) = read_request(&mut s).await else {
            return;
        };
        if self.tried(&key) == 1 {
            return; // dropped: closed without an answer
        }
        let answer = b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n";
        if s.write_all(answer).await.is_ok() && s.flush().await.is_ok() {
            self.took.lock().unwrap().insert(key);
        }
    }
}

/// The `"n"` of a webhook body (`{"fault":…,"n":N}`), 0 if none.
fn number(body: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["n"].as_u64())
        .unwrap_or(0)
}

/// Reads a request's head and `Content-Length` body from `s` (at most
/// 10 s): its idempotency key and body.
async fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
        };
        let key = header("idempotency-key:").unwrap_or_default();
        let len: usize = header("content-length:").and_then(|v| v.parse().ok())?;
        while got.len() < end + len {
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        }
        Some((key, got[end..end + len].to_vec()))
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}
