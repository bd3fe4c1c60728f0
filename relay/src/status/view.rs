//! A webhook's status as `GET /v1/webhooks/{id}` answers it, and the
//! lookup both listeners share: an id that is not a number, an unknown
//! one and one the caller does not own all answer the same 404.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Found, State};
use crate::domain::problem::problem;

/// A webhook's status.
#[derive(Serialize, Debug, ToSchema)]
pub(crate) struct WebhookStatus {
    /// The webhook's id, as its 202 named it.
    pub id: String,
    /// Where it is.
    pub state: State,
    /// The destination it goes to.
    pub destination: Option<String>,
    /// Delivery attempts made so far.
    pub attempts: u32,
    /// The receiver's last HTTP status; `null` before any answer.
    pub last_status: Option<u16>,
    /// Its last failed attempt's error, `kind: message` (kind `dns`,
    /// `connect`, `tls`, `timeout`, `closed`, `status`, `too_large` or
    /// `refused`); `null` if none failed.
    pub last_error: Option<String>,
    /// When the next attempt is due (RFC 3339), while `retry_waiting`.
    pub next_attempt_at: Option<String>,
    /// When the relay received it (RFC 3339).
    pub received_at: Option<String>,
    /// When it was delivered or dead-lettered (RFC 3339).
    pub ended_at: Option<String>,
}

/// Milliseconds since the epoch as RFC 3339.
fn rfc3339(ms: u64) -> String {
    // The last millisecond of 9999: RFC 3339 has no later year.
    let t = UNIX_EPOCH + Duration::from_millis(ms.min(253_402_300_799_999));
    humantime::format_rfc3339_millis(t).to_string()
}

impl WebhookStatus {
    fn of(id: u64, f: Found) -> WebhookStatus {
        let s = f.status;
        WebhookStatus {
            id: id.to_string(),
            state: s.state,
            destination: s.destination.map(|d| d.to_string()),
            attempts: s.attempts,
            last_status: s.last_status,
            last_error: s.last_error.map(|e| e.to_string()),
            next_attempt_at: s.next_attempt_unix_ms.map(rfc3339),
            received_at: s.received_unix_ms.map(rfc3339),
            ended_at: f.ended_unix_ms.map(rfc3339),
        }
    }
}

/// 404: unknown, forgotten, or not the caller's.
pub(crate) fn unknown() -> Response {
    let detail = "no webhook of that id is known to this caller (unknown, or forgotten after status_retention)";
    problem(
        StatusCode::NOT_FOUND,
        "unknown-webhook",
        detail.to_owned(),
        Vec::new(),
    )
}

/// The answer for `id`, `found` (or not), to a caller who may see the
/// webhooks of `owner` (`None`: every webhook).
pub(crate) fn respond(id: u64, found: Option<Found>, owner: Option<&Arc<str>>) -> Response {
    let Some(found) = found else {
        return unknown();
    };
    if let Some(owner) = owner
        && found.status.tenant.as_ref() != Some(owner)
    {
        return unknown();
    }
    Json(WebhookStatus::of(id, found)).into_response()
}

/// An id: 1 to 20 decimal digits.
pub(crate) fn parse(id: &str) -> Option<u64> {
    if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}
