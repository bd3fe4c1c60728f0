//! RFC 9457 problem bodies: every refusal intake makes, with the wait-hint
//! header fields (`Retry-After`, `RateLimit`, `RateLimit-Policy`) when
//! waiting helps. A problem names nothing the caller does not own.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why an answer was given, for the `reason` label of
/// `dripfeed_relay_intake_answers_total`: the problem type, or a finer
/// cause set over it (`queue-full`, `byte-budget`, `journal-full`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reason(pub &'static str);

/// A `application/problem+json` response of `kind` (`urn:dripfeed:problem:KIND`)
/// with `fields` as headers, its [`Reason`] the kind.
pub(crate) fn problem(
    status: StatusCode,
    kind: &'static str,
    detail: String,
    fields: Vec<(&'static str, String)>,
) -> Response {
    let retry_after = fields
        .iter()
        .find(|(k, _)| *k == "retry-after")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let body = json!({
        "type": format!("urn:dripfeed:problem:{kind}"),
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "detail": detail,
        "retry_after": retry_after,
    });
    let mut resp = (status, body.to_string()).into_response();
    resp.extensions_mut().insert(Reason(kind));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    for (name, value) in fields {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    resp
}
