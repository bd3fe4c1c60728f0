//! RFC 9457 problem bodies: every refusal intake makes, with the wait-hint
//! header fields (`Retry-After`, `RateLimit`, `RateLimit-Policy`) when
//! waiting helps. A problem names nothing the caller does not own.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dripfeed::{Cause, Reason, Rejected, headers};
use serde_json::json;

use super::answers::Answers;
use super::job::Job;

/// A `application/problem+json` response of `kind` (`urn:dripfeed:problem:KIND`)
/// with `fields` as headers.
pub fn problem(
    status: StatusCode,
    kind: &str,
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

/// The problem for a webhook the set refused, counted in `answers`.
pub fn refused(answers: &Answers, r: Rejected<Job>) -> Response {
    let fields = headers::for_rejected(&r);
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let (kind, detail) = match r.reason() {
        Reason::Overloaded => {
            Answers::bump(&answers.full_503);
            ("overloaded", "the delivery queue is full; retry later")
        }
        Reason::OverQuota => {
            Answers::bump(&answers.quota_429);
            ("over-quota", "this tenant is over its quota; retry later")
        }
        Reason::Closed => {
            Answers::bump(&answers.closed_503);
            ("closed", "the relay is shutting down")
        }
        Reason::Unavailable {
            cause: Cause::JournalFull,
        } => {
            Answers::bump(&answers.journal_503);
            ("unavailable", "the relay's journal is full; retry later")
        }
        Reason::Unavailable {
            cause: Cause::JournalFailed,
        } => {
            Answers::bump(&answers.journal_503);
            (
                "unavailable",
                "the relay cannot write its journal; retry later",
            )
        }
        Reason::Unavailable { .. } => {
            Answers::bump(&answers.store_503);
            (
                "unavailable",
                "the tenant quota store is unavailable; retry later",
            )
        }
        _ => ("invalid", "this webhook can never be admitted"),
    };
    problem(status, kind, detail.to_owned(), fields)
}
