//! Slow and hostile clients over raw TCP: trickled heads and bodies are cut
//! by the read timeouts, connections past `--max-connections` are refused
//! without stalling the rest, SIGTERM ends within its grace with stalled
//! clients connected, an oversized `Content-Length` is a 413 before its
//! body, and ambiguous framing (`Transfer-Encoding: gzip, chunked`, or both
//! `Content-Length` and `Transfer-Encoding`) is a 400; a refusal before
//! the body is read reads it (or says `Connection: close`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Relay, TempDir, eventually};
use crate::raw::{self, head};
use crate::receivers::{self, Log};

/// The new settings these tests set (kept apart to run the tests against
/// an older relay).
const TIMEOUTS: &str = "--header-read-timeout 1s --body-read-timeout 2s";

/// A relay delivering to `rx`, in memory, with `extra` flags.
async fn relay(rx: SocketAddr, dir: &TempDir, extra: &str) -> Relay {
    Relay::start(&format!(
        "--downstream http://{rx}/hooks --no-journal --dead-letter-file {} {extra}",
        dir.arg("dead-letter.jsonl"),
    ))
    .await
}

/// A connection that sends `first`, then one more byte (`each`) every
/// 200 ms for up to 60 s; whether the relay closed it within `limit`.
pub(crate) async fn trickle(addr: SocketAddr, first: String, each: u8, limit: Duration) -> bool {
    let (mut rd, mut wr) = raw::connect(addr).await.into_split();
    if wr.write_all(first.as_bytes()).await.is_err() {
        return true;
    }
    let writer = tokio::spawn(async move {
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if wr.write_all(&[each]).await.is_err() {
                return;
            }
        }
    });
    let wait = async {
        let mut buf = [0u8; 4096];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let closed = tokio::time::timeout(limit, wait).await.is_ok();
    writer.abort();
    closed
}

/// 40 connections trickling a head and 40 trickling a body are all closed
/// by the relay within 20 s (header read timeout 1 s, body 2 s); then a
/// normal request is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_heads_and_bodies_are_cut() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("trickle");
    let relay = relay(rx, &dir, TIMEOUTS).await;
    let limit = Duration::from_secs(20);
    let mut tasks = Vec::new();
    for i in 0..80 {
        let first = match i % 2 {
            0 => head("x-slow: "),
            _ => head("content-length: 1000\r\n\r\n"),
        };
        tasks.push(tokio::spawn(trickle(relay.addr, first, b'a', limit)));
    }
    let mut open = 0;
    for t in tasks {
        open += u32::from(!t.await.unwrap_or(false));
    }
    eprintln!("trickling connections still open after {limit:?}: {open} of 80");
    assert_eq!(open, 0, "every trickling connection is closed");
    assert_eq!(relay.post(&[], "{}").await.0, 202);
}

/// `--max-connections 8`: with 8 stalled connections held, a 9th is
/// answered 503 at once rather than left waiting; once the stalled ones
/// are cut, a normal client gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_refused_without_stalling() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("max-connections");
    let relay = relay(rx, &dir, "--max-connections 8 --header-read-timeout 3s").await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut s = raw::connect(relay.addr).await;
        s.write_all(head("x-slow: ").as_bytes()).await.unwrap();
        held.push(s);
    }
    // Answered (503) or closed well before the stalled ones are cut.
    let request = format!("{}content-length: 2\r\n\r\n{{}}", head(""));
    let ninth = raw::exchange(relay.addr, request.as_bytes(), Duration::from_secs(2)).await;
    eprintln!("the 9th connection: {ninth:?}");
    assert_eq!(ninth, Some(503), "the 9th connection is refused at once");
    let mut cut = 0;
    for s in &mut held {
        cut += u32::from(raw::closed_within(s, Duration::from_secs(20)).await);
    }
    assert_eq!(cut, 8, "the stalled connections are cut");
    let through = eventually(Duration::from_secs(20), || async {
        relay.post(&[], "{}").await.0 == 202
    })
    .await;
    assert!(through, "a normal client gets through");
    let m = relay.metrics().await;
    let refused = m.get("dripfeed_relay_connections_refused_total", &[]);
    assert!(refused >= 1.0, "refusals are counted: {refused}");
}

/// SIGTERM with a stalled head, a stalled body and an idle keep-alive
/// connection held (read timeouts of 60 s, so only shutdown can cut
/// them): the relay exits 0 within 20 s (grace 1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_stalled_clients_ends_within_the_grace() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("stalled-shutdown");
    let mut relay = relay(
        rx,
        &dir,
        "--shutdown-grace 1s --header-read-timeout 60s --body-read-timeout 60s",
    )
    .await;
    let mut stalled_head = raw::connect(relay.addr).await;
    stalled_head
        .write_all(head("x-slow: ").as_bytes())
        .await
        .unwrap();
    let mut stalled_body = raw::connect(relay.addr).await;
    let partial = format!("{}content-length: 100\r\n\r\n{{", head(""));
    stalled_body.write_all(partial.as_bytes()).await.unwrap();
    let mut idle = raw::connect(relay.addr).await;
    let request = format!("{}content-length: 2\r\n\r\n{{}}", head(""));
    idle.write_all(request.as_bytes()).await.unwrap();
    let answered = raw::status(&mut idle, Duration::from_secs(10)).await;
    assert_eq!(answered, Some(202), "the keep-alive request is answered");
    relay.signal("TERM");
    let status = relay.exit(Duration::from_secs(20)).await;
    assert!(status.success(), "exit status {status:?}");
    for (name, s) in [
        ("head", &mut stalled_head),
        ("body", &mut stalled_body),
        ("idle", &mut idle),
    ] {
        assert!(
            raw::closed_within(s, Duration::from_secs(5)).await,
            "the {name} connection is closed"
        );
    }
}

/// A `Content-Length` of 100 MB is answered 413 with no body sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_content_length_is_refused_before_its_body() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("oversized");
    let relay = relay(rx, &dir, "").await;
    let request = head("content-length: 100000000\r\n\r\n");
    let status = raw::exchange(relay.addr, request.as_bytes(), Duration::from_secs(10)).await;
    assert_eq!(status, Some(413));
}

/// `Transfer-Encoding: gzip, chunked`, and `Content-Length` with
/// `Transfer-Encoding` in either order, are a 400; plain chunked is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_is_refused() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("framing");
    let relay = relay(rx, &dir, "").await;
    let chunked = "2\r\n{}\r\n0\r\n\r\n";
    let cases = [
        ("transfer-encoding: gzip, chunked\r\n", 400),
        (
            "transfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n",
            400,
        ),
        ("content-length: 11\r\ntransfer-encoding: chunked\r\n", 400),
        ("transfer-encoding: chunked\r\ncontent-length: 11\r\n", 400),
        ("transfer-encoding: chunked\r\n", 202),
    ];
    let mut wrong = Vec::new();
    for (headers, want) in cases {
        let request = format!("{}{headers}\r\n{chunked}", head(""));
        let got = raw::exchange(relay.addr, request.as_bytes(), Duration::from_secs(10)).await;
        eprintln!("{headers:?}: {got:?}");
        if got != Some(want) {
            wrong.push((headers, got));
        }
    }
    assert!(wrong.is_empty(), "answered otherwise: {wrong:?}");
}

/// The head of the answer on `s` (up to its blank line), lower-cased.
async fn answer_head(s: &mut tokio::net::TcpStream) -> String {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&got).to_lowercase()
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_default()
}

/// A request refused before its body is read (an unknown application, a
/// destination that does not exist) reads and drops the body it announced
/// (within the limit), so a client still sending a large one reads the
/// answer, and the connection carries the next request (the relay closed
/// it unread, and keep-alive clients wrote into a closed connection: a
/// broken pipe); a path no route serves says `Connection: close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_before_the_body_reads_it_or_says_the_connection_closes() {
    let rx = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("refused-before-body");
    let relay = relay(rx, &dir, "").await;
    let small = "{\"type\":\"a.b\",\"payload\":{}}".to_owned();
    let large = format!(
        "{{\"type\":\"a.b\",\"payload\":\"{}\"}}",
        "x".repeat(900_000)
    );
    for (path, extra, body, status, closes) in [
        ("/v1/applications/nope/events", "", &small, "404", false),
        ("/v1/applications/nope/events", "", &large, "404", false),
        (
            "/v1/webhooks/deliver",
            "x-destination: nope\r\n",
            &large,
            "404",
            false,
        ),
        ("/v1/no/such/route", "", &small, "404", true),
        ("/v1/webhooks/deliver", "", &small, "202", false),
    ] {
        let mut s = raw::connect(relay.addr).await;
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: relay\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.expect("sent whole");
        let head = answer_head(&mut s).await;
        assert!(
            head.starts_with(&format!("http/1.1 {status}")),
            "{path}: {head}"
        );
        assert_eq!(head.contains("connection: close"), closes, "{path}: {head}");
        if !closes {
            // The same connection takes the next request.
            s.write_all(b"GET /healthz HTTP/1.1\r\nhost: relay\r\n\r\n")
                .await
                .expect("sent");
            let next = answer_head(&mut s).await;
            assert!(next.contains("http/1.1 200"), "{path}, then: {next}");
        }
    }
}
