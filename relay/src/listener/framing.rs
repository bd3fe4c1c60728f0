//! A request naming both `Content-Length` and `Transfer-Encoding` is
//! refused with 400 (RFC 9112 §6.1 allows it; such a message is how
//! requests are smuggled past a proxy that reads the other header). hyper
//! keeps the `Transfer-Encoding` and drops the `Content-Length` before a
//! handler sees the request, so the connection's bytes are watched here:
//! each request head is scanned for the two names, a `Content-Length`
//! body is skipped to find the next head, and after a head with
//! `Transfer-Encoding` the scan stops — intake closes the connection after
//! answering such a request, so no later head needs finding. Only the
//! first bytes of each header line are kept: a few dozen bytes per
//! connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A head longer than this is refused (431); the scan stops.
const MAX_HEAD: usize = 64 * 1024;

/// What the scan found on the connection, read from each request's
/// extensions: a head with `Transfer-Encoding` and `Content-Length`
/// (intake answers 400), or a head longer than 64 KiB (the listener
/// answers 431: hyper checks its buffer only while a head is incomplete,
/// so a long head read whole would pass).
#[derive(Clone, Default, Debug)]
pub(crate) struct Framing(Arc<Found>);

#[derive(Default, Debug)]
struct Found {
    both_lengths: AtomicBool,
    too_long: AtomicBool,
}

impl Framing {
    /// Whether a head had both framing headers.
    pub(crate) fn both_lengths(&self) -> bool {
        self.0.both_lengths.load(Ordering::Relaxed)
    }

    /// Whether a head was longer than 64 KiB.
    pub(crate) fn too_long(&self) -> bool {
        self.0.too_long.load(Ordering::Relaxed)
    }
}

/// The bytes of a header line kept: enough for either name and a length.
const KEEP: usize = 48;

/// A head being read, a line at a time, keeping only each line's start
/// (in place: scanning allocates nothing).
#[derive(Default)]
struct Head {
    /// The current line's first [`KEEP`] bytes (a value's padding left
    /// out: see [`keep`](Head::keep)).
    line: Line,
    /// Where the current line's colon is, once kept.
    colon: Option<usize>,
    /// Bytes of the head so far.
    len: usize,
    /// The request line has been read.
    started: bool,
    /// The current line can be neither framing header nor the blank line
    /// ending the head (its first byte says so): its bytes are passed over.
    skip: bool,
    te: bool,
    cl: Option<u64>,
}

/// The first bytes of a header line, kept inline.
struct Line {
    bytes: [u8; KEEP],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            bytes: [0; KEEP],
            len: 0,
        }
    }
}

impl Line {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Keeps `b` if there is room.
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }
}

/// Where the scan is in the connection's bytes.
enum Scan {
    /// Reading a head.
    Head(Head),
    /// Skipping this many body bytes.
    Body(u64),
    /// No more heads to scan.
    Done,
}

/// A stream whose request heads are scanned as they are read.
pub(crate) struct Scanned<S> {
    inner: S,
    scan: Scan,
    framing: Framing,
}

impl<S> Scanned<S> {
    /// Wraps `inner`, reporting into `framing`.
    pub(crate) fn new(inner: S, framing: Framing) -> Self {
        Scanned {
            inner,
            scan: Scan::Head(Head::default()),
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
                        self.scan = Scan::Head(Head::default());
                    }
                }
                Scan::Head(head) => {
                    // The current line's bytes read so far, and its end.
                    let end = memchr::memchr(b'\n', bytes);
                    let taken = end.map_or(bytes.len(), |at| at + 1);
                    let line = &bytes[..end.unwrap_or(bytes.len())];
                    bytes = &bytes[taken..];
                    head.len += taken;
                    if head.len > MAX_HEAD {
                        self.framing.0.too_long.store(true, Ordering::Relaxed);
                        self.scan = Scan::Done;
                        return;
                    }
                    for &b in line {
                        if head.skip {
                            break;
                        }
                        head.keep(b);
                    }
                    if end.is_none() {
                        return;
                    }
                    if let Some(next) = head.end_line() {
                        if next.0 && next.1.is_some() {
                            self.framing.0.both_lengths.store(true, Ordering::Relaxed);
                        }
                        self.scan = match next {
                            (true, _) => Scan::Done,
                            (false, Some(0) | None) => Scan::Head(Head::default()),
                            (false, Some(n)) => Scan::Body(n),
                        };
                    }
                }
            }
        }
    }
}

impl Head {
    /// Keeps byte `b` of the current line, within [`KEEP`]. A value's
    /// leading blanks and leading zeros are not kept, so a `Content-Length`
    /// padded past the kept bytes (`Content-Length:` and forty spaces, or
    /// forty zeros, then `5`) is still read as the length hyper reads:
    /// misread, the scan would skip the rest of the connection as body and
    /// miss a later head with both lengths.
    fn keep(&mut self, b: u8) {
        if self.line.len == 0 && self.colon.is_none() {
            // The line's first byte: only a header named `c…` or `t…`, and
            // the blank line (`\r`), need reading; a request line only
            // needs to have been there.
            let wanted = match b {
                b'\r' => true,
                b'c' | b'C' | b't' | b'T' => self.started,
                _ => false,
            };
            if !wanted {
                self.skip = true;
                return;
            }
        }
        if let Some(colon) = self.colon {
            let value = self.line.as_slice().get(colon + 1..).unwrap_or_default();
            let blank = b == b' ' || b == b'\t';
            if value.is_empty() && blank {
                return;
            }
            if value == b"0" && b.is_ascii_digit() {
                // "0" then a digit: the zero was padding.
                self.line.pop();
            }
        } else if b == b':' && self.line.len < KEEP {
            // A colon past the kept bytes is not kept either: the line is
            // no framing header (both names are shorter).
            self.colon = Some(self.line.len);
        }
        self.line.push(b);
    }

    /// Ends the current line; at the blank line ending the head, whether
    /// it had `Transfer-Encoding`, and its `Content-Length` (an unreadable
    /// one counts as present: hyper refuses it).
    fn end_line(&mut self) -> Option<(bool, Option<u64>)> {
        let ended = if self.skip {
            // Not blank: the request line, or another header.
            self.started = true;
            None
        } else {
            self.read_line()
        };
        self.line.len = 0;
        self.colon = None;
        self.skip = false;
        ended
    }

    /// What the line just ended says (see [`end_line`](Head::end_line)).
    fn read_line(&mut self) -> Option<(bool, Option<u64>)> {
        let line = self.line.as_slice();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            // Blank lines before a request line are allowed and skipped.
            return self.started.then_some((self.te, self.cl));
        }
        if !self.started {
            self.started = true;
            return None;
        }
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.te = true;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(value).unwrap_or("").trim();
            self.cl = Some(text.parse().unwrap_or(u64::MAX));
        }
        None
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Scanned<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.feed(&buf.filled()[before..]);
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
        // A blank line before a request line, a header line far longer
        // than what is kept, a byte at a time.
        let long = format!(
            "\r\nPOST / HTTP/1.1\r\nx-long: {}\r\ntransfer-encoding: chunked\r\ncontent-length: 1\r\n\r\n",
            "a".repeat(10_000)
        );
        let bytes: Vec<&[u8]> = long.as_bytes().chunks(1).collect();
        assert_eq!(scan(&bytes), (true, true));
    }

    #[test]
    fn other_lines_are_passed_over_whatever_they_hold() {
        // Named in another header's value, or as a request target: not framing.
        let head = b"POST /transfer-encoding HTTP/1.1\r\nx-note: transfer-encoding: chunked\r\naccept: content-length: 9\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(scan(&[head]), (false, false));
        let bytes: Vec<&[u8]> = head.chunks(3).collect();
        assert_eq!(scan(&bytes), (false, false));
        // ... and the next head is still found after the body.
        let both = b"POST / HTTP/1.1\r\nContent-Length: 11\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(scan(&[head, both]), (true, true));
    }

    #[test]
    fn a_header_name_longer_than_what_is_kept_is_passed_over() {
        // The colon falls past the kept bytes (it once panicked there).
        let name = "x-".to_owned() + &"n".repeat(KEEP + 10);
        let head = format!(
            "POST / HTTP/1.1\r\n{name}: value\r\n{name}:\r\ntransfer-encoding: chunked\r\ncontent-length: 1\r\n\r\n"
        );
        assert_eq!(scan(&[head.as_bytes()]), (true, true));
        let bytes: Vec<&[u8]> = head.as_bytes().chunks(1).collect();
        assert_eq!(scan(&bytes), (true, true));
    }

    #[test]
    fn a_padded_content_length_is_read_as_hyper_reads_it() {
        // Padded past the kept bytes, then a body that is not a head, then
        // a second head with both lengths: found.
        for pad in [
            " ".repeat(60),
            "0".repeat(60),
            format!("\t{}", "0".repeat(60)),
        ] {
            let first = format!("POST / HTTP/1.1\r\nContent-Length:{pad}5\r\n\r\nhello");
            let second =
                b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
            assert_eq!(scan(&[first.as_bytes(), second]), (true, true), "{pad:?}");
        }
        // A zero length stays zero; a plain one is unchanged.
        let zero = b"POST / HTTP/1.1\r\ncontent-length: 0\r\n\r\nPOST / HTTP/1.1\r\ncontent-length: 00\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(scan(&[zero]), (true, true));
    }
}
