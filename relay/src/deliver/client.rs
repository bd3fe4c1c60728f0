//! The HTTP client every delivery uses: hyper-util's pooling client over
//! rustls (ring), with the system's roots plus `ca_file`'s, HTTP/1.1, a
//! timeout per delivery, no redirects (a receiver cannot send a webhook
//! somewhere else), no retries of its own (the relay's are paced and
//! counted), no proxy from the environment (the connection goes where the
//! guard checked), and a resolver that drops the addresses the
//! [`AddressGuard`] refuses.
//!
//! It is hyper's client with nothing on top: reqwest's layers (a redirect
//! policy that parses the URL of every request, a response that parses it
//! again, copies of each head in case of a retry) cost more per webhook
//! than the exchange itself.
//!
//! Only the answer's status and headers are waited for, within the
//! timeout; its body is dropped unread, as reqwest's was: hyper keeps the
//! connection when the body had already come with the head (a short one
//! usually has) and closes it otherwise, so a receiver that stalls after
//! its head does not hold a delivery.
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
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{self, connect::HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::guard::AddressGuard;
use super::resolver::GuardedResolver;
use crate::config::Settings;

/// TCP keepalive: idle time before the first probe, and between probes.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The connections: TCP through the guarded resolver, TLS for `https://`.
type Connector = HttpsConnector<HttpConnector<GuardedResolver>>;

/// The client deliveries share (cloned: one pool).
#[derive(Clone, Debug)]
pub struct Client {
    inner: legacy::Client<Connector, Full<Bytes>>,
    timeout: Duration,
}

/// A receiver's answer.
#[derive(Debug)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its `Retry-After`, as a wait from now.
    pub retry_after: Option<Duration>,
}

/// Why a delivery got no answer.
#[derive(Debug)]
pub enum Failure {
    /// No answer within the delivery timeout.
    TimedOut(Duration),
    /// No connection, or one that failed before an answer.
    Http(legacy::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::TimedOut(after) => write!(f, "no answer within {after:?}"),
            Failure::Http(e) => {
                write!(f, "{e}")?;
                // hyper's own message names the stage; the cause says why.
                let mut next = std::error::Error::source(e);
                while let Some(cause) = next {
                    write!(f, ": {cause}")?;
                    next = cause.source();
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::TimedOut(_) => None,
            Failure::Http(e) => Some(e),
        }
    }
}

impl Client {
    /// Sends `req`: its answer (or why there is none) and how long it took.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> (Result<Answer, Failure>, Duration) {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let resp = match tokio::time::timeout_at(deadline, self.inner.request(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return (Err(Failure::Http(e)), started.elapsed()),
            Err(_) => return (Err(Failure::TimedOut(self.timeout)), started.elapsed()),
        };
        let answer = Answer {
            status: resp.status(),
            retry_after: super::retry_after(resp.headers()),
        };
        // The body is dropped unread (see the module docs).
        drop(resp);
        (Ok(answer), started.elapsed())
    }
}

/// The client of the settings `s`: deliveries time out after
/// `deliver_timeout`, and `ca_file`'s roots are trusted with the system's.
pub fn client(
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
/// connections to each receiver, connecting only where `guard` allows; or
/// why it cannot be made (an unreadable `ca_file`).
pub fn build(
    timeout: Duration,
    ca_file: Option<&std::path::Path>,
    pool_per_host: usize,
    guard: Arc<AddressGuard>,
) -> Result<Client, String> {
    // rustls with ring, installed once per process (a second call finds
    // it) for the other TLS users; this client names its provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = match ca_file {
        Some(path) => ca_certs(path).map_err(|e| format!("ca_file {e}"))?,
        None => Vec::new(),
    };
    // The system's roots, and `ca_file`'s added to them (not instead).
    let verifier = if extra.is_empty() {
        rustls_platform_verifier::Verifier::new(provider.clone())
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
    }
    .map_err(|e| format!("the TLS roots (the system's and ca_file's): {e}"))?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("the TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut http = HttpConnector::new_with_resolver(GuardedResolver::new(guard));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_keepalive(Some(KEEPALIVE));
    http.set_keepalive_interval(Some(KEEPALIVE));
    http.set_keepalive_retries(Some(3));
    #[cfg(target_os = "linux")]
    http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
    // `http://` and `https://` both (the builder would refuse a preset ALPN).
    let connector = HttpsConnector::from((http, Arc::new(tls)));
    let inner = legacy::Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_max_idle_per_host(pool_per_host)
        .build(connector);
    Ok(Client { inner, timeout })
}

/// The certificates of a PEM file (`ca_file`), or why there are none.
pub fn ca_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
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

    /// A receiver answering every request with `answer`; its address.
    async fn receiver(answer: Vec<u8>) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
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

    fn post(addr: std::net::SocketAddr) -> Request<Full<Bytes>> {
        Request::post(format!("http://{addr}/hooks"))
            .body(Full::new(Bytes::from_static(b"{\"n\":1}")))
            .unwrap()
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
        let (answer, _) = client.send(post(addr)).await;
        assert!(matches!(answer, Err(Failure::TimedOut(_))), "{answer:?}");

        let stalled = receiver(
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 7\r\ncontent-length: 100\r\n\r\npartial".to_vec(),
        )
        .await;
        let client = loopback_client(Duration::from_secs(30));
        let (answer, took) = client.send(post(stalled)).await;
        assert!(
            took < Duration::from_secs(15),
            "waited for the body: {took:?}"
        );
        let answer = answer.unwrap();
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.retry_after, Some(Duration::from_secs(7)));
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let dir = std::env::temp_dir().join(format!("dripfeed-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = ca_certs(&path).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(ca_certs(&dir.join("missing.pem")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
