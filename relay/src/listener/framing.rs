//! A request naming both `Content-Length` and `Transfer-Encoding` is
//! refused with 400 (RFC 9112 §6.1 allows it; such a message is how
//! requests are smuggled past a proxy that reads the other header). hyper
//! keeps the `Transfer-Encoding` and drops the `Content-Length` before a
//! handler sees the request, so the connection's bytes are watched here:
//! each request head is scanned for the two names, a `Content-Length`
//! body is skipped to find the next head, and after a head with
//! `Transfer-Encoding` the scan stops — intake closes the connection after
//! answering such a request, so no later head needs finding.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A head longer than this is hyper's to refuse (431); the scan stops.
const MAX_HEAD: usize = 64 * 1024;

/// Set once a head on the connection had `Transfer-Encoding` with
/// `Content-Length`; read by intake from the request's extensions.
#[derive(Clone, Default, Debug)]
pub struct Framing(Arc<AtomicBool>);

impl Framing {
    /// Whether a head had both framing headers.
    pub fn both_lengths(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Where the scan is in the connection's bytes.
enum Scan {
    /// Gathering a head (bytes so far).
    Head(Vec<u8>),
    /// Skipping this many body bytes.
    Body(u64),
    /// No more heads to scan.
    Done,
}

/// A stream whose request heads are scanned as they are read.
pub struct Scanned<S> {
    inner: S,
    scan: Scan,
    framing: Framing,
}

impl<S> Scanned<S> {
    /// Wraps `inner`, reporting into `framing`.
    pub fn new(inner: S, framing: Framing) -> Self {
        Scanned {
            inner,
            scan: Scan::Head(Vec::new()),
            framing,
        }
    }

    /// Feeds bytes just read.
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.scan {
                Scan::Done => return,
                Scan::Body(left) => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &bytes[n as usize..];
                    if *left == 0 {
                        self.scan = Scan::Head(Vec::new());
                    }
                }
                Scan::Head(head) => {
                    // Blank lines between messages are allowed; skip them.
                    let start = head.len().saturating_sub(3);
                    head.extend_from_slice(bytes);
                    let Some(end) = find(&head[start..], b"\r\n\r\n").map(|i| start + i + 4) else {
                        if head.len() > MAX_HEAD {
                            self.scan = Scan::Done;
                        }
                        return;
                    };
                    let rest = head.len() - end;
                    let (te, cl) = framing_headers(&head[..end]);
                    bytes = &bytes[bytes.len() - rest..];
                    self.scan = match (te, cl) {
                        (true, Some(_)) => {
                            self.framing.0.store(true, Ordering::Relaxed);
                            Scan::Done
                        }
                        (true, None) => Scan::Done,
                        (false, Some(0) | None) => Scan::Head(Vec::new()),
                        (false, Some(n)) => Scan::Body(n),
                    };
                }
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Whether `head` has `Transfer-Encoding`, and its `Content-Length` (an
/// unreadable one counts as present: hyper refuses it).
fn framing_headers(head: &[u8]) -> (bool, Option<u64>) {
    let (mut te, mut cl) = (false, None);
    for line in head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            te = true;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(value).unwrap_or("").trim();
            cl = Some(text.parse().unwrap_or(u64::MAX));
        }
    }
    (te, cl)
}

impl<S: AsyncRead + Unpin> AsyncRead for Scanned<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && !matches!(self.scan, Scan::Done)
        {
            let fresh = buf.filled()[before..].to_vec();
            self.feed(&fresh);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Scanned<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]]) -> (bool, bool) {
        let framing = Framing::default();
        let mut s = Scanned::new((), framing.clone());
        for c in chunks {
            s.feed(c);
        }
        (framing.both_lengths(), matches!(s.scan, Scan::Done))
    }

    #[test]
    fn finds_both_framing_headers_in_any_head() {
        let cl = b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
        let te = b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        let both = b"POST / HTTP/1.1\r\nContent-Length: 11\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(scan(&[cl, cl]), (false, false));
        assert_eq!(scan(&[te]), (false, true));
        assert_eq!(scan(&[both]), (true, true));
        // The second message, split mid-head, after a body that looks like a head.
        let tricky =
            b"POST / HTTP/1.1\r\ncontent-length: 32\r\n\r\ntransfer-encoding: x\r\n\r\n12345678";
        assert_eq!(scan(&[tricky, &both[..20], &both[20..]]), (true, true));
    }
}
