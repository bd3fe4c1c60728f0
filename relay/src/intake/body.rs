//! A request's framing and body: what is checked before a byte of the body
//! is read (its framing headers, its announced length), and the read
//! itself, bounded in bytes (`max_body_bytes`) and time
//! (`body_read_timeout`), its bytes held against the budget while read.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::domain::problem::problem;
pub(crate) use crate::listener::closing::{close, has_body};

/// Why a body was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Framing the relay does not accept (400).
    Framing(&'static str),
    /// Over the limit, announced or sent (413).
    TooLarge(u64),
    /// Not all sent within the timeout (408).
    TooSlow(Duration),
    /// The connection failed mid-body (400).
    Broken,
}

impl BodyError {
    /// The problem answered for it; the connection closes after a 408.
    pub(crate) fn answer(&self) -> Response {
        let (status, kind, detail) = match self {
            BodyError::Framing(why) => (StatusCode::BAD_REQUEST, "bad-framing", why.to_string()),
            BodyError::TooLarge(max) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("bodies are limited to {max} bytes"),
            ),
            BodyError::TooSlow(limit) => (
                StatusCode::REQUEST_TIMEOUT,
                "too-slow",
                format!("the body did not arrive within {limit:?}"),
            ),
            BodyError::Broken => (
                StatusCode::BAD_REQUEST,
                "bad-body",
                "the body could not be read".to_owned(),
            ),
        };
        let mut resp = problem(status, kind, detail, Vec::new());
        if matches!(self, BodyError::TooSlow(_) | BodyError::Framing(_)) {
            close(&mut resp);
        }
        resp
    }
}

/// Reads and drops a refused request's `body` when its length is announced
/// (no chunks, no `Expect`) and at most `max`, within `limit`: whether it
/// was read whole (the connection can then carry another request).
pub(crate) async fn drain(headers: &HeaderMap, body: Body, max: u64, limit: Duration) -> bool {
    // A client that waits for `100 Continue` has not sent its body: it is
    // not asked for (reading it would send the 100), and the connection
    // closes after the refusal.
    if headers.contains_key(header::TRANSFER_ENCODING) || headers.contains_key(header::EXPECT) {
        return false;
    }
    if announced(headers).is_none_or(|n| n > max) {
        return false;
    }
    let mut body = body;
    let read = async {
        let mut seen: u64 = 0;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                seen = seen.saturating_add(data.len() as u64);
                if seen > max {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(limit, read).await.unwrap_or(false)
}

/// The body's length as `Content-Length` announces it, if it does.
fn announced(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Checks framing before the body is read: `Transfer-Encoding` other than
/// exactly `chunked`, or with a `Content-Length` (`both_lengths`, seen by
/// the listener), is refused; an announced length over `max` is refused.
/// Returns the announced length.
pub(crate) fn check_framing(
    headers: &HeaderMap,
    both_lengths: bool,
    max: u64,
) -> Result<Option<u64>, BodyError> {
    let mut te = headers.get_all(header::TRANSFER_ENCODING).iter();
    if let Some(first) = te.next() {
        let chunked = first
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"chunked");
        if !chunked || te.next().is_some() {
            return Err(BodyError::Framing(
                "Transfer-Encoding other than chunked is not accepted",
            ));
        }
        if both_lengths {
            return Err(BodyError::Framing(
                "a request with both Content-Length and Transfer-Encoding is not accepted",
            ));
        }
    }
    match announced(headers) {
        Some(n) if n > max => Err(BodyError::TooLarge(max)),
        n => Ok(n),
    }
}

/// Reads `body`: at most `max` bytes, within `limit`.
pub(crate) async fn read(body: Body, max: u64, limit: Duration) -> Result<Bytes, BodyError> {
    let cap = usize::try_from(max).unwrap_or(usize::MAX);
    let collect = Limited::new(body, cap).collect();
    match tokio::time::timeout(limit, collect).await {
        Err(_) => Err(BodyError::TooSlow(limit)),
        // Copied out at its length: the frames are slices of the
        // connection's read buffer, and a queued body that kept one would
        // keep the whole buffer (about 7 KB RSS per queued 1 KiB body).
        Ok(Ok(collected)) => Ok(Bytes::copy_from_slice(&collected.to_bytes())),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(BodyError::TooLarge(max))
        }
        Ok(Err(_)) => Err(BodyError::Broken),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn framing_is_checked_before_the_body() {
        let ok = headers(&[("transfer-encoding", "Chunked")]);
        assert_eq!(check_framing(&ok, false, 10), Ok(None));
        assert!(check_framing(&ok, true, 10).is_err(), "with Content-Length");
        let gzip = headers(&[("transfer-encoding", "gzip, chunked")]);
        assert!(check_framing(&gzip, false, 10).is_err());
        let two = headers(&[
            ("transfer-encoding", "gzip"),
            ("transfer-encoding", "chunked"),
        ]);
        assert!(check_framing(&two, false, 10).is_err());
        let big = headers(&[("content-length", "11")]);
        assert_eq!(check_framing(&big, false, 10), Err(BodyError::TooLarge(10)));
        let fits = headers(&[("content-length", "10")]);
        assert_eq!(check_framing(&fits, false, 10), Ok(Some(10)));
    }

    #[tokio::test]
    async fn bodies_are_limited() {
        let read = |s: &'static str| read(Body::from(s), 3, Duration::from_secs(5));
        assert_eq!(read("abc").await, Ok(Bytes::from_static(b"abc")));
        assert_eq!(read("abcd").await, Err(BodyError::TooLarge(3)));
    }
}
