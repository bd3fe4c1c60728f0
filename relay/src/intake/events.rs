//! `POST /v1/applications/{app}/events`: a sender posts an event with a
//! type for one of its applications, and each endpoint of the application
//! subscribed to the type gets its own copy (see [`crate::queue::events`]).
//!
//! The application is in the path, as the peers (Svix, Hook0) put it:
//! who may post for it is checked before a byte of the body is read (a
//! tenant key posts only for its tenant's `applications`), and the URL
//! names what is posted to. The body is `{"type": "...", "payload": ...}`;
//! the payload (any JSON) is what each endpoint receives, its type in
//! `webhook-event-type` and the event's id in `webhook-id`.
//!
//! The same path as a webhook's, in the same order: the caller, size and
//! header checks, the application, the body held against the byte budget,
//! then the queue's admission (the event and every copy durable in one
//! write), 202 with the event's id and how many endpoints it went to.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::answers::Answers;
use super::{Intake, Refusal, bad_name, refusal};
use crate::config::subscription::check_type;
use crate::domain::names;
use crate::domain::schemas::Problem;
use crate::listener::framing::Framing;
use crate::queue::events::EventPost;

/// An event as posted.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventIn {
    /// Its type: 1 to 128 of `A-Z a-z 0-9 . _ - :`, dot-separated parts
    /// (`invoice.paid`); endpoints subscribe to types and prefixes.
    #[serde(rename = "type")]
    #[schema(
        example = "invoice.paid",
        pattern = "^[A-Za-z0-9_:-]+(\\.[A-Za-z0-9_:-]+)*$",
        max_length = 128
    )]
    kind: String,
    /// What each endpoint receives as its body (any JSON), the event's
    /// id as `webhook-id` and its type as `webhook-event-type`.
    #[schema(value_type = Value, example = json!({"invoice": "in_123", "amount": 4200}))]
    payload: serde_json::Value,
}

/// An event's payload as its sender wrote it: what each endpoint receives
/// (the parsed value reorders an object's keys; the filters read that).
#[derive(Deserialize)]
struct RawPayload<'a> {
    #[serde(borrow)]
    payload: &'a serde_json::value::RawValue,
}

/// `POST /v1/applications/{app}/events`: taken.
#[derive(Serialize, ToSchema)]
pub(crate) struct EventAccepted {
    /// The event's id: each endpoint sees it as `webhook-id` (and
    /// `idempotency-key`); `GET /v1/applications/{app}/events/{id}` on the
    /// admin listener shows each copy and attempt.
    #[schema(example = "1764338411000000001")]
    id: String,
    /// The endpoints it went to (subscribed to its type, enabled, its
    /// payload passing their filters); 0 is taken too.
    endpoints: usize,
    /// `queued`, or `duplicate` (an `Idempotency-Key` taken before:
    /// nothing new was queued, and `endpoints` is what it went to then).
    #[schema(example = "queued")]
    status: &'static str,
}

/// `POST /v1/applications/{app}/events`.
#[utoipa::path(post, path = "/v1/applications/{app}/events", tag = "intake", operation_id = "post_event",
    security(("tenant_key" = [])),
    request_body(content = EventIn, content_type = "application/json",
        description = "The event: its type and its payload (at most max_body_bytes in all)."),
    params(
        ("app" = String, Path, description = "The application (one of the sender's customers) it is for.", pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$"),
        ("Idempotency-Key" = Option<String>, Header, description = "A key making a retried POST safe: a repeat (the same application, tenant, type and payload) answers the first event's id, and nothing fans out twice; the key with another type or payload is refused (422 key-reused). 1 to 256 visible ASCII characters.",
            nullable = false, max_length = 256, pattern = "^[!-~]+$"),
    ),
    responses(
        (status = 202, description = "Taken: the event and a copy for each endpoint subscribed are durable (a copy its endpoint's queue did not take is dead-lettered with reason overflow, and recoverable).", body = EventAccepted),
        (status = 400, description = "A body that is not JSON, bad framing, or a blank or unreadable Idempotency-Key.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No key, an unknown one or an expired one (with [[tenants]]).", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "The caller's tenant may not post events for that application.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name (for a tenant that may post for every one).", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body did not arrive within body_read_timeout.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over max_body_bytes.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not an event: type missing or not a type, payload missing, or another field (bad-event); or an Idempotency-Key taken before by this tenant for this application with another type or payload (key-reused).", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The tenant is over its quota (one charge per event).", body = Problem, content_type = "application/problem+json",
            headers(
                ("Retry-After" = u64, description = "Seconds until the quota has room."),
                ("RateLimit" = String, description = "The tenant's quota's state (draft-ietf-httpapi-ratelimit-headers)."),
                ("RateLimit-Policy" = String, description = "The tenant's quota."),
            )),
        (status = 503, description = "The byte budget has no room, the events store or the dead-letter file cannot take it, the quota store is unavailable, the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until a retry may be taken."))),
    ))]
pub(crate) async fn post_event(
    State(intake): State<Arc<Intake>>,
    Path(app): Path<String>,
    request: Request,
) -> Response {
    // Run to its end in a task of its own: a client that hangs up never
    // leaves an event written and its copies not yet sent.
    let done = super::finish::Finish::new(async move {
        let (parts, body) = request.into_parts();
        let mut unread = Some(body);
        let mut answer = match take(&intake, app, &parts, &mut unread).await {
            Ok(resp) => resp,
            Err(refusal) => *refusal,
        };
        if let Some(unread) = unread {
            intake
                .refused_unread(&parts.headers, unread, &mut answer)
                .await;
        }
        intake.answers.count(&answer);
        answer
    });
    done.await.unwrap_or_else(|| {
        tracing::error!("an event's request path panicked");
        crate::domain::problem::problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the relay could not take this event; retry with the same Idempotency-Key".into(),
            Vec::new(),
        )
    })
}

/// The event's request path, each step's refusal as the error.
async fn take(
    intake: &Intake,
    app: String,
    parts: &axum::http::request::Parts,
    unread: &mut Option<axum::body::Body>,
) -> Result<Response, Refusal> {
    let headers = &parts.headers;
    let caller = intake.caller(headers)?;
    let both_lengths = parts
        .extensions
        .get::<Framing>()
        .is_some_and(Framing::both_lengths);
    let announced = super::body::check_framing(headers, both_lengths, intake.max_body_bytes)
        .map_err(|e| intake.body_refused(&e))?;
    let key = names::idempotency_key(headers).map_err(|e| bad_name("Idempotency-Key", e))?;
    if caller
        .account
        .as_ref()
        .is_some_and(|a| !a.may_post_for(&app))
    {
        Answers::bump(&intake.answers.forbidden_403);
        let detail = "this tenant may not post events for that application".to_owned();
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "forbidden-application",
            detail,
        ));
    }
    if intake.catalog.app(&app).is_none() {
        let detail = "no application of that name".to_owned();
        return Err(refusal(
            StatusCode::NOT_FOUND,
            "unknown-application",
            detail,
        ));
    }
    if let Some(down) = intake.queue.not_keeping() {
        Answers::bump(&intake.answers.dead_letter_503);
        let wait = dripfeed::headers::spread_seconds(down.wait).to_string();
        return Err(Box::new(crate::domain::problem::problem(
            StatusCode::SERVICE_UNAVAILABLE,
            down.kind,
            down.detail.into(),
            vec![("retry-after", wait)],
        )));
    }
    let tenant_bytes = caller.tenant.named.as_ref().map_or(0, String::len);
    let body = unread.take().unwrap_or_default();
    let (body, ticket) = intake.read_body(body, announced, tenant_bytes).await?;
    let event: EventIn = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => {
            let detail = format!("the body is not JSON: {e}");
            return Err(refusal(StatusCode::BAD_REQUEST, "bad-json", detail));
        }
        Ok(v) if !v.is_object() => {
            let detail = "not an event: an event is a JSON object".to_owned();
            return Err(refusal(
                StatusCode::UNPROCESSABLE_ENTITY,
                "bad-event",
                detail,
            ));
        }
        Ok(v) => serde_json::from_value(v).map_err(|e| {
            let detail = format!("not an event ({{\"type\": \"...\", \"payload\": ...}}): {e}");
            refusal(StatusCode::UNPROCESSABLE_ENTITY, "bad-event", detail)
        })?,
    };
    check_type(&event.kind).map_err(|e| {
        refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad-event",
            format!("type: {e}"),
        )
    })?;
    let payload = match serde_json::from_slice::<RawPayload<'_>>(&body) {
        Ok(raw) => raw.payload.get().as_bytes().to_vec(),
        // A body the value read but this does not (a key given twice):
        // the value's own text.
        Err(_) => serde_json::to_vec(&event.payload).unwrap_or_default(),
    };
    let taken = intake
        .queue
        .events()
        .post(EventPost {
            app,
            kind: event.kind,
            payload: payload.into(),
            json: event.payload,
            key: key.map(|k| names::scoped_key(caller.tenant.scope(), &k)),
            tenant: caller.tenant,
            charged: caller.charged,
            ticket,
        })
        .await
        .map_err(|r| Box::new(super::refused::refused(&intake.answers, r)))?;
    let status = match taken.duplicate {
        true => "duplicate",
        false => "queued",
    };
    let body = EventAccepted {
        id: taken.id.to_string(),
        endpoints: taken.endpoints,
        status,
    };
    Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
}
