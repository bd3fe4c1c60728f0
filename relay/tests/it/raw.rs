//! A raw TCP client for what reqwest will not send: partial heads, bodies
//! that trickle, conflicting framing headers. Every read has a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connects to `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("a connection")
}

/// Sends `bytes` on a new connection and reads the answer's status line,
/// at most `limit`: `Some(status)`, or `None` when the connection closed
/// (or nothing came) without one.
pub(crate) async fn exchange(addr: SocketAddr, bytes: &[u8], limit: Duration) -> Option<u16> {
    let mut s = connect(addr).await;
    s.write_all(bytes).await.ok()?;
    status(&mut s, limit).await
}

/// Reads an answer's status line from `s`, at most `limit`.
pub(crate) async fn status(s: &mut TcpStream, limit: Duration) -> Option<u16> {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.windows(2).any(|w| w == b"\r\n") {
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let line = String::from_utf8_lossy(&got);
        line.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(limit, read).await.ok().flatten()
}

/// Whether the peer has closed `s` (EOF or reset) within `limit`; bytes
/// it sends first (an answer) are read and dropped.
pub(crate) async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let wait = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

/// A `POST /v1/webhooks/deliver` head with `extra` header lines (each
/// ending in `\r\n`), without the blank line that ends it.
pub(crate) fn head(extra: &str) -> String {
    format!("POST /v1/webhooks/deliver HTTP/1.1\r\nhost: relay\r\n{extra}")
}
