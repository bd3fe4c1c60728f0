//! An answer that ends its connection: a request whose body the relay did
//! not read cannot be followed by another on the same connection (hyper
//! closes it), and the answer says so.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

/// Whether a request with `headers` carries a body: a length over 0, or
/// chunks.
pub(crate) fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// Asks for the connection to close after `resp`.
pub(crate) fn close(resp: &mut Response) {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}
