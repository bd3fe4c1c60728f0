//! The HTTP client every delivery uses: hyper's HTTP/1.1 connections over
//! rustls (ring), with the system's roots plus `ca_file`'s, a timeout per
//! delivery, no redirects (a receiver cannot send a webhook somewhere
//! else), no retries of its own (the relay's are paced and counted), no
//! proxy from the environment (the connection goes where the guard
//! checked), and a resolver that drops the addresses the [`AddressGuard`]
//! refuses.
//!
//! It is hyper's `client::conn` with nothing on top: each destination keeps
//! its own idle connections ([`super::pool`]), so a delivery takes one
//! with a lock and a short scan and writes its request on it. reqwest's layers (a
//! redirect policy that parsed every request's URL, a response that parsed
//! it again, copies of each head in case of a retry) and hyper-util's
//! shared pool (a hashed key per checkout and per return) cost more per
//! webhook than the exchange itself. A request a pooled connection did not
//! send (the receiver closed it while idle) is sent on a new connection.
//!
//! Only the answer's status and headers are waited for, within the
//! timeout; its body is dropped unread: hyper keeps the connection when
//! the body had already come with the head (a short one usually has) and
//! closes it otherwise, so a receiver that stalls after its head does not
//! hold a delivery.
//!
//! TCP keepalive probes (after 15 s idle, every 15 s, 3 of them) and, on
//! Linux, a 30 s `TCP_USER_TIMEOUT` are set as reqwest sets them, so a
//! pooled connection a NAT dropped silently is found dead before the next
//! delivery waits its whole timeout on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tower::ServiceExt;

use super::endpoint::Endpoint;
use super::guard::AddressGuard;
use super::pool::Sender;
use super::resolver::GuardedResolver;
use crate::config::Settings;

/// TCP keepalive: idle time before the first probe, and between probes.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The connections: TCP through the guarded resolver, TLS for `https://`.
type Connector = HttpsConnector<HttpConnector<GuardedResolver>>;

/// What a connection fails with.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The client deliveries share.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    connector: Connector,
    timeout: Duration,
    /// Idle connections kept per destination.
    most_idle: usize,
}

/// A receiver's answer.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its `Retry-After`, as a wait from now.
    pub retry_after: Option<Duration>,
}

/// Why a delivery got no answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No answer within the delivery timeout.
    TimedOut(Duration),
    /// No connection: the name, the address (the guard's refusal among
    /// the causes), TCP or TLS.
    Connect(BoxError),
    /// A connection that failed before an answer.
    Http(hyper::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let first: &(dyn std::error::Error + 'static) = match self {
            Failure::TimedOut(after) => return write!(f, "no answer within {after:?}"),
            Failure::Connect(e) => {
                f.write_str("connecting: ")?;
                e.as_ref()
            }
            Failure::Http(e) => e,
        };
        // The message, then each cause (why the stage failed).
        write!(f, "{first}")?;
        let mut next = first.source();
        while let Some(cause) = next {
            write!(f, ": {cause}")?;
            next = cause.source();
        }
        Ok(())
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::TimedOut(_) => None,
            Failure::Connect(e) => Some(e.as_ref()),
            Failure::Http(e) => Some(e),
        }
    }
}

impl Client {
    /// How long an attempt waits for its answer (`deliver_timeout`).
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends `req` (origin form, with its `Host`) to `endpoint`: its answer
    /// (or why there is none) and how long it took.
    pub(crate) async fn send(
        &self,
        endpoint: &Endpoint,
        req: Request<Full<Bytes>>,
    ) -> (Result<Answer, Failure>, Duration) {
        let started = Instant::now();
        let result = match tokio::time::timeout(self.timeout, self.exchange(endpoint, req)).await {
            Ok(result) => result,
            // The request's connection closes with its dropped future.
            Err(_) => Err(Failure::TimedOut(self.timeout)),
        };
        (result, started.elapsed())
    }

    async fn exchange(
        &self,
        endpoint: &Endpoint,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Answer, Failure> {
        if let Some(mut sender) = endpoint.idle.take() {
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok(self.answered(endpoint, sender, resp)),
                Err(mut e) => match e.take_message() {
                    // Not sent (closed while idle): on a new connection.
                    Some(unsent) => req = unsent,
                    None => return Err(Failure::Http(e.into_error())),
                },
            }
        }
        let mut sender = self.connect(endpoint).await?;
        let resp = sender.send_request(req).await.map_err(Failure::Http)?;
        Ok(self.answered(endpoint, sender, resp))
    }

    /// The answer's status and `Retry-After`; its body dropped and the
    /// connection given back.
    fn answered(
        &self,
        endpoint: &Endpoint,
        sender: Sender,
        resp: hyper::Response<Incoming>,
    ) -> Answer {
        let answer = Answer {
            status: resp.status(),
            retry_after: super::retry_after(resp.headers()),
        };
        drop(resp);
        endpoint.idle.give_back(sender, self.most_idle);
        answer
    }

    /// A new connection to `endpoint`, its task spawned.
    async fn connect(&self, endpoint: &Endpoint) -> Result<Sender, Failure> {
        let io = self
            .connector
            .clone()
            .oneshot(endpoint.uri.clone())
            .await
            .map_err(Failure::Connect)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(Failure::Http)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "a delivery connection ended");
            }
        });
        Ok(sender)
    }
}

/// The client of the settings `s`: deliveries time out after
/// `deliver_timeout`, and `ca_file`'s roots are trusted with the system's.
pub(crate) fn client(
    s: &Settings,
    pool_per_host: usize,
    guard: Arc<AddressGuard>,
) -> Result<Client, String> {
    build(
        s.deliver_timeout,
        s.ca_file.as_deref(),
        pool_per_host,
        guard,
    )
}

/// A client whose deliveries time out after `timeout`, trusting the
/// system's roots and `ca_file`'s, keeping up to `pool_per_host` idle
/// connections to each destination, connecting only where `guard` allows;
/// or why it cannot be made (an unreadable `ca_file`).
pub(crate) fn build(
    timeout: Duration,
    ca_file: Option<&std::path::Path>,
    pool_per_host: usize,
    guard: Arc<AddressGuard>,
) -> Result<Client, String> {
    let mut http = HttpConnector::new_with_resolver(GuardedResolver::new(guard));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_keepalive(Some(KEEPALIVE));
    http.set_keepalive_interval(Some(KEEPALIVE));
    http.set_keepalive_retries(Some(3));
    #[cfg(target_os = "linux")]
    http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
    // `http://` and `https://` both (the builder would refuse a preset ALPN).
    let connector = HttpsConnector::from((http, Arc::new(crate::tls::client::config(ca_file)?)));
    Ok(Client {
        connector,
        timeout,
        most_idle: pool_per_host,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Reads one request (head, then a `content-length` body); false at
    /// the connection's end.
    async fn read_request(s: &mut TcpStream) -> bool {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    return true;
                }
            }
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// A receiver answering every request with `answer`, counting the
    /// connections it accepts; its address.
    async fn receiver(answer: Vec<u8>, connections: Arc<AtomicUsize>) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    while read_request(&mut s).await {
                        if s.write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn loopback_client(timeout: Duration) -> Client {
        let guard = AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        build(timeout, None, 4, Arc::new(guard)).unwrap()
    }

    fn endpoint(addr: std::net::SocketAddr) -> Endpoint {
        Endpoint::parse(&format!("http://{addr}/hooks")).unwrap()
    }

    fn post(endpoint: &Endpoint) -> Request<Full<Bytes>> {
        Request::post(endpoint.origin.clone())
            .header("host", endpoint.host.clone())
            .body(Full::new(Bytes::from_static(b"{\"n\":1}")))
            .unwrap()
    }

    /// Deliveries to one destination, one after another, share one
    /// connection: each is given back once its answer came; one idle too
    /// long is let go.
    #[tokio::test]
    async fn a_destination_reuses_its_connection() {
        let client = loopback_client(Duration::from_secs(10));
        let connections = Arc::new(AtomicUsize::new(0));
        let addr = receiver(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
            connections.clone(),
        )
        .await;
        let to = endpoint(addr);
        for _ in 0..5 {
            let (answer, _) = client.send(&to, post(&to)).await;
            assert_eq!(answer.unwrap().status, StatusCode::OK);
            // Given back at once; ready once its connection task has
            // finished the answer.
            assert_eq!(to.idle.count().0, 1);
            for _ in 0..1000 {
                if to.idle.count().1 == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(to.idle.count(), (1, 1));
        }
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        // Idle past the timeout: let go, not used.
        let later = Instant::now() + super::super::pool::IDLE_TIMEOUT + Duration::from_secs(1);
        assert!(to.idle.take_at(later).is_none());
        assert_eq!(to.idle.count(), (0, 0));

        // Two connections (two deliveries at once): the older is let go
        // once idle too long, even while the newer keeps being taken.
        let (a, b) = tokio::join!(client.send(&to, post(&to)), client.send(&to, post(&to)));
        assert!(a.0.is_ok() && b.0.is_ok());
        assert_eq!(connections.load(Ordering::SeqCst), 3);
        for _ in 0..1000 {
            if to.idle.count() == (2, 2) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(to.idle.count(), (2, 2));
        let (first, second) = (to.idle.take().unwrap(), to.idle.take().unwrap());
        let t0 = Instant::now();
        let timeout = super::super::pool::IDLE_TIMEOUT;
        to.idle.give_back_at(first, 4, t0);
        to.idle.give_back_at(second, 4, t0 + timeout);
        assert!(
            to.idle
                .take_at(t0 + timeout + Duration::from_secs(1))
                .is_some()
        );
        assert_eq!(to.idle.count(), (0, 0), "the older one let go");
    }

    /// No answer within the timeout is `TimedOut`; a head that came in
    /// time stands at once, even when its body never ends.
    #[tokio::test]
    async fn the_timeout_covers_the_head_and_not_a_stalled_body() {
        let client = loopback_client(Duration::from_millis(300));
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s); // read nothing, answer nothing
            }
        });
        let to = endpoint(addr);
        let (answer, _) = client.send(&to, post(&to)).await;
        assert!(matches!(answer, Err(Failure::TimedOut(_))), "{answer:?}");

        let stalled = receiver(
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 7\r\ncontent-length: 100\r\n\r\npartial".to_vec(),
            Arc::new(AtomicUsize::new(0)),
        )
        .await;
        let client = loopback_client(Duration::from_secs(30));
        let to = endpoint(stalled);
        let (answer, took) = client.send(&to, post(&to)).await;
        assert!(
            took < Duration::from_secs(15),
            "waited for the body: {took:?}"
        );
        let answer = answer.unwrap();
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.retry_after, Some(Duration::from_secs(7)));
    }
}
