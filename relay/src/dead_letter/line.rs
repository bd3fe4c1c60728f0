//! One dead-letter line: a JSON object naming the webhook's id (absent if
//! it was never tried), its destination, its attempts and the receiver's
//! last status and its last attempt's `error` (`kind: message`; for a
//! delivery the address guard refused, the refusal), with its body (as text, or base64 when it is not UTF-8).

use base64::Engine;
use serde::Serialize;

use crate::domain::job::Job;

/// One dead-letter line, as written.
#[derive(Serialize)]
struct Line<'a> {
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    destination: &'a str,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_status: Option<u32>,
    /// Its last attempt's error (`kind: message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    tenant: Option<&'a str>,
    /// An event's copy: the event's type (its id is `id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    event_type: Option<&'a str>,
    content_type: Option<&'a str>,
    received_unix_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
}

/// `job`'s line, ending in a newline; `destination` names the destination
/// of a webhook that never learnt one (recovered and never tried).
pub(super) fn encode(
    job: &Job,
    reason: &str,
    destination: &str,
) -> Result<Vec<u8>, serde_json::Error> {
    let text = std::str::from_utf8(&job.body).ok();
    let attempts = job.trail.attempts();
    let error = job.trail.last_error();
    let line = Line {
        reason,
        id: match job.trail.id() {
            0 => None,
            id => Some(id.to_string()),
        },
        destination: job.destination_name().unwrap_or(destination),
        attempts,
        // 0: no answer (a DNS, connect or TLS error, a timeout): none.
        last_status: Some(job.trail.last_status()).filter(|s| attempts > 0 && *s != 0),
        error: error.as_deref(),
        tenant: job.tenant.as_deref(),
        event_type: job.event.as_ref().map(|e| &*e.kind),
        content_type: job.content_type.as_deref(),
        received_unix_ms: job.received_unix_ms,
        body: text,
        body_base64: text
            .is_none()
            .then(|| base64::engine::general_purpose::STANDARD.encode(&job.body)),
    };
    let mut out = serde_json::to_vec(&line)?;
    out.push(b'\n');
    Ok(out)
}
