//! Intake: `POST /v1/webhooks/deliver` and `GET /healthz`.
//!
//! A webhook goes through one path, in one order (DESIGN, "the relay's
//! request path"): the body's size → the destination the request names
//! (only configured ones; never a URL it gives) → its `Idempotency-Key` →
//! the byte budget → admission into the destinations set (the tenant's
//! quota, the destination's queue and the set's bound, the journal) → 202
//! with the webhook's id. Each refusal is an RFC 9457 problem.
//!
//! The tenant's quota is charged inside admission, not before the
//! idempotency key: the set charges the tenant and takes the queue place in
//! one call (giving the charge back when the queue refuses), so a repeated
//! key, answered before admission, never charges its tenant twice.

mod answers;
pub mod budget;
pub mod idempotency;
pub mod job;
pub mod problem;
pub mod tenants;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use dripfeed::destinations::Destinations;
use dripfeed::{Admitted, headers};
use serde_json::json;

use crate::dead_letter::Health;
pub use answers::Answers;
use budget::ByteBudget;
use idempotency::{Begin, Idempotency, body_hash};
use job::Job;
use problem::{problem, refused};

/// Bodies above this are refused with 413.
pub const MAX_BODY: usize = 1 << 20;

/// What intake needs to take a webhook in.
pub struct Intake {
    /// The destinations: the only receivers a webhook can go to.
    pub set: Destinations<Job>,
    /// Their names, in configuration order.
    pub names: Vec<Arc<str>>,
    /// The header that names a destination.
    pub destination_header: String,
    /// The header that names the tenant.
    pub tenant_header: String,
    /// Tenants have quotas (the set's template has a key store).
    pub keyed: bool,
    /// Bytes of bodies held.
    pub budget: ByteBudget,
    /// Accepted `Idempotency-Key`s.
    pub idempotency: Idempotency,
    /// What was answered.
    pub answers: Answers,
    /// Whether the dead-letter file takes lines: while it does not, every
    /// webhook is refused (503), since one that fails could not be kept.
    pub dead_letter: Arc<Health>,
}

/// The intake routes.
pub fn router(intake: Arc<Intake>) -> Router {
    Router::new()
        .route("/v1/webhooks/deliver", post(deliver))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(intake)
}

async fn deliver(
    State(intake): State<Arc<Intake>>,
    headers_in: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match take(&intake, &headers_in, body).await {
        Ok(resp) => resp,
        Err(refusal) => *refusal,
    }
}

/// A step's refusal: the answer to send instead of a 202.
type Refusal = Box<Response>;

/// The request path, each step's refusal as the error.
async fn take(
    intake: &Intake,
    headers_in: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    let body = intake.body(body)?;
    let destination = intake.pick(headers_in)?;
    let text = |name: &str| {
        headers_in
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let key = text("idempotency-key");
    if let Some(key) = &key
        && let Some(answer) = repeat(intake, key, &body)
    {
        return Ok(answer);
    }
    let refuse = |refusal: Response| {
        if let Some(key) = &key {
            intake.idempotency.refused(key);
        }
        Box::new(refusal)
    };
    if let Some(down) = intake.dead_letter.unavailable() {
        Answers::bump(&intake.answers.dead_letter_503);
        let fields = vec![(
            "retry-after",
            headers::retry_after(headers::jittered(down.wait)),
        )];
        let status = StatusCode::SERVICE_UNAVAILABLE;
        return Err(refuse(problem(
            status,
            down.kind,
            down.detail.into(),
            fields,
        )));
    }
    let ticket = intake.budget.try_take(body.len()).ok_or_else(|| {
        Answers::bump(&intake.answers.bytes_503);
        // Answered like a full queue: the wait until the set has drained.
        let fields = vec![("retry-after", headers::retry_after(queue_wait(&intake.set)))];
        let detail = "the relay holds its byte budget of queued bodies; retry later";
        refuse(problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            detail.into(),
            fields,
        ))
    })?;
    let tenant = text(&intake.tenant_header);
    let job = Job::new(
        body,
        text(header::CONTENT_TYPE.as_str()),
        tenant.clone(),
        destination.clone(),
        ticket,
    );
    let trail = job.trail.clone();
    // With a journal both answer once the webhook is durable.
    let admitted = match tenant {
        Some(tenant) if intake.keyed => {
            intake
                .set
                .submit_keyed(&destination, &tenant, 1.0, job)
                .await
        }
        _ => intake.set.try_submit_durable(&destination, job).await,
    };
    let admitted = admitted.map_err(|r| refuse(refused(&intake.answers, r)))?;
    trail.name(admitted.id());
    if let Some(key) = &key
        && let Err(e) = intake.idempotency.accepted(key, admitted.id()).await
    {
        // The webhook itself is durable; only a repeat after a restart
        // could be taken as new.
        tracing::warn!(error = %e, "idempotency key not stored");
    }
    Ok(accepted(&intake.answers, admitted))
}

/// The answer to a repeated `Idempotency-Key`, or `None` for a new one
/// (now marked as being admitted).
fn repeat(intake: &Intake, key: &str, body: &[u8]) -> Option<Response> {
    match intake.idempotency.begin(key, body_hash(body)) {
        Begin::New => None,
        Begin::Repeat(id) => {
            let body = json!({"status": "duplicate", "id": id.to_string()});
            Some((StatusCode::ACCEPTED, axum::Json(body)).into_response())
        }
        Begin::Conflict => {
            let detail = "this Idempotency-Key was used with another body".to_owned();
            Some(problem(
                StatusCode::UNPROCESSABLE_ENTITY,
                "key-reused",
                detail,
                Vec::new(),
            ))
        }
        Begin::InProgress => {
            let detail = "a request with this Idempotency-Key is still being admitted".to_owned();
            Some(problem(
                StatusCode::CONFLICT,
                "key-in-progress",
                detail,
                Vec::new(),
            ))
        }
    }
}

/// 202, naming the webhook by the id its receiver sees as `idempotency-key`.
fn accepted(answers: &Answers, admitted: Admitted) -> Response {
    let status = if admitted.is_deferred() {
        Answers::bump(&answers.deferred);
        "deferred"
    } else {
        Answers::bump(&answers.queued);
        "queued"
    };
    let body = json!({"status": status, "id": admitted.id().to_string()});
    (StatusCode::ACCEPTED, axum::Json(body)).into_response()
}

/// The time until the set has delivered what it holds: queued webhooks over
/// the rates draining them, jittered like the library's own hints.
pub fn queue_wait(set: &Destinations<Job>) -> Duration {
    let (depth, rate) = set
        .all_stats()
        .iter()
        .filter(|s| s.is_active())
        .fold((0u64, 0.0f64), |(d, r), s| {
            (d + s.depth(), r + s.drain_rate())
        });
    let wait = match rate > 0.0 {
        true => Duration::from_secs_f64((depth as f64 / rate).min(3600.0)),
        false => Duration::from_secs(1),
    };
    headers::jittered(wait)
}

/// A refusal with a problem body and no header fields.
fn refusal(status: StatusCode, kind: &str, detail: String) -> Refusal {
    Box::new(problem(status, kind, detail, Vec::new()))
}

impl Intake {
    /// The body, or 413 / 400.
    fn body(&self, body: Result<Bytes, BytesRejection>) -> Result<Bytes, Refusal> {
        match body {
            Ok(b) => Ok(b),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Answers::bump(&self.answers.too_large_413);
                let detail = format!("bodies are limited to {MAX_BODY} bytes");
                Err(refusal(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail))
            }
            Err(e) => Err(refusal(e.status(), "bad-body", e.body_text())),
        }
    }

    /// The destination a request names: 404 for a name not configured, 400
    /// without the header when more than one destination is configured.
    fn pick(&self, headers: &HeaderMap) -> Result<Arc<str>, Refusal> {
        let header = &self.destination_header;
        match headers.get(header.as_str()).map(|v| v.to_str()) {
            Some(Ok(name)) => {
                let name = name.trim();
                let found = self.names.iter().find(|n| &***n == name).cloned();
                found.ok_or_else(|| {
                    let detail = format!("no destination {name:?} is configured");
                    refusal(StatusCode::NOT_FOUND, "unknown-destination", detail)
                })
            }
            Some(Err(_)) => {
                let detail = format!("the {header} header is not text");
                Err(refusal(StatusCode::BAD_REQUEST, "bad-destination", detail))
            }
            None => match &self.names[..] {
                [only] => Ok(only.clone()),
                names => {
                    let names: Vec<&str> = names.iter().map(|n| &**n).collect();
                    let detail = format!(
                        "name the destination with the {header} header (one of: {})",
                        names.join(", ")
                    );
                    Err(refusal(
                        StatusCode::BAD_REQUEST,
                        "missing-destination",
                        detail,
                    ))
                }
            },
        }
    }
}
