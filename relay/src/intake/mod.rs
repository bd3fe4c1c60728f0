//! Intake: `POST /v1/webhooks/deliver` and `GET /healthz`.
//!
//! A webhook goes through one path, in one order (DESIGN, "the relay's
//! request path"), all of it in [`take`]:
//!
//! 1. who is calling: with `[[tenants]]`, the tenant whose key
//!    `Authorization: Bearer KEY` presents (401 with `WWW-Authenticate:
//!    Bearer` otherwise; the tenant header is not read); on an open relay
//!    the tenant header's, or `default`;
//!    then size limits and header checks, before a byte of the body is read:
//!    framing (`Transfer-Encoding` other than `chunked`, or with a
//!    `Content-Length`: 400), the announced length (over `max_body_bytes`:
//!    413), the `Idempotency-Key` (blank, unreadable or over 256 bytes:
//!    400) and, open, the tenant (over 256 bytes: 400);
//! 2. the destination the request names (only configured ones; never a
//!    URL it gives; 403 for one the tenant may not use);
//! 3. the body (not read at all while the dead-letter file takes no
//!    lines: 503 `dead-letter-unavailable` or `dead-letter-full`), its
//!    bytes held against the byte budget while read (503 when
//!    the budget has no room, 413 past the limit, 408 past
//!    `body_read_timeout`); a body labelled JSON must be JSON (400);
//! 4. admission by the queue ([`crate::queue::Queue::admit`], whichever
//!    engine keeps it): the idempotency key (scoped by the tenant, naming
//!    its destination and body: a repeat answers here), the tenant's
//!    quota, the destination's bound, durability;
//! 5. 202 with the webhook's id, or the queue's refusal as a problem.
//!
//! The path runs as a task of its own ([`deliver`]), so a client that hangs
//! up cannot cancel an admission half way.
//!
//! Each refusal is an RFC 9457 problem naming nothing the caller does not
//! own. A refused request's key and bytes are given back at once.
//!
//! The tenant's quota is charged inside admission, after the idempotency
//! key: a repeated key never charges its tenant twice, and a refused
//! webhook's charge is given back. With quotas on, every request is
//! charged: one without a readable tenant to the `default` tenant.

mod answers;
pub(crate) mod body;
mod caller;
mod events;
mod finish;
mod json;
pub(crate) mod lookup;
mod refused;
mod route;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use dripfeed::headers;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::tenants::Tenants;
use crate::domain::budget::{ByteBudget, JOB_OVERHEAD, Ticket};
use crate::domain::job::Job;
use crate::domain::names::{self, BadName};
use crate::domain::problem::problem;
use crate::domain::schemas::{Accepted, Problem};
use crate::openapi;
use crate::queue::{Admission, Queue};
pub(crate) use answers::Answers;
use body::BodyError;
use refused::refused;

use crate::listener::framing::Framing;

/// What intake needs to take a webhook in.
pub(crate) struct Intake {
    /// The queue (whichever engine keeps it): the only way a webhook goes.
    pub queue: Arc<dyn Queue>,
    /// The destinations in force (configured, and changed through the
    /// admin API): the names a request may use.
    pub catalog: Arc<crate::catalog::Catalog>,
    /// The header that names a destination.
    pub destination_header: String,
    /// The header that names the tenant (read only on an open relay).
    pub tenant_header: String,
    /// The tenants and their keys (a reload may change them); `None`: the
    /// relay is open (loopback, or `allow_unauthenticated`).
    pub tenants: Option<crate::util::swap::Swap<Tenants>>,
    /// Tenants have quotas (the set's template has a key store).
    pub keyed: bool,
    /// Bytes held for clients: bodies, keys, tenant names.
    pub budget: ByteBudget,
    /// What was answered.
    pub answers: Answers,
    /// The largest body taken.
    pub max_body_bytes: u64,
    /// How long a body may take to arrive.
    pub body_read_timeout: Duration,
    /// The tracer, with traces exported (`otlp_endpoint`).
    pub traces: crate::trace::Shared,
}

/// The intake routes, each with its OpenAPI description. A layer added
/// here (or in `openapi::finish`) does not reach `POST
/// /v1/webhooks/deliver`, which the listener answers directly ([`direct`]).
pub(crate) fn routes() -> OpenApiRouter<Arc<Intake>> {
    OpenApiRouter::new()
        .routes(routes!(deliver))
        .routes(routes!(events::post_event))
        .routes(routes!(lookup::webhook))
        .routes(routes!(healthz))
        // Intake reads bodies itself, within max_body_bytes.
        .layer(DefaultBodyLimit::disable())
}

/// The intake router, serving its document at `/openapi.json`.
pub(crate) fn router(intake: Arc<Intake>) -> Router {
    let (destination, tenant) = (
        intake.destination_header.clone(),
        intake.tenant_header.clone(),
    );
    let headers = [
        ("X-Destination", destination.as_str()),
        ("X-Tenant", tenant.as_str()),
    ];
    openapi::finish(routes(), openapi::Listener::Intake, intake, &headers)
}

/// The path of [`deliver`].
pub(crate) const DELIVER_PATH: &str = "/v1/webhooks/deliver";

/// `POST /v1/webhooks/deliver` answered by the listener without the router
/// (see [`crate::listener::app`]); the router's route stays for the
/// OpenAPI document and answers nothing the direct one does not.
pub(crate) fn direct(intake: Arc<Intake>) -> crate::listener::app::Direct {
    crate::listener::app::Direct {
        method: axum::http::Method::POST,
        path: DELIVER_PATH,
        handle: Arc::new(move |request| {
            let intake = intake.clone();
            Box::pin(async move { Ok(deliver(State(intake), request).await) })
        }),
    }
}

/// `GET /healthz`: the process serves.
#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses(
        (status = 200, description = "The relay serves.", body = String, content_type = "text/plain", example = "ok\n"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// `POST /v1/webhooks/deliver`: take a webhook in (see the module docs).
#[utoipa::path(post, path = "/v1/webhooks/deliver", tag = "intake", operation_id = "deliver_webhook",
    security(("tenant_key" = [])),
    request_body(content = serde_json::Value, content_type = "application/json",
        description = "The webhook's body, delivered as it came with its Content-Type, at most max_body_bytes. Any content type is taken; one labelled JSON (application/json, or +json) must be JSON (any JSON value)."),
    params(
        ("X-Destination" = Option<String>, Header, example = "billing", nullable = false, description = "The destination to deliver to (destination_header), by name. Needed when the caller may post to several destinations (without it: 422 missing-destination); where it may use only one, it may be left out (that one is meant)."),
        ("Idempotency-Key" = Option<String>, Header, description = "A key making a retried POST safe: a repeat within idempotency_window answers the first id. 1 to 256 visible ASCII characters.",
            nullable = false, max_length = 256, pattern = "^[!-~]+$"),
        ("X-Tenant" = Option<String>, Header, description = "The tenant (tenant_header), read only on an open relay (no [[tenants]]: over 256 bytes is a 400 there); with tenants the key decides and it is not read.", nullable = false),
    ),
    responses(
        (status = 202, description = "Accepted: queued (durable with the journal), deferred, or a duplicate of an Idempotency-Key accepted before.", body = Accepted,
            links(("status" = (operation_id = "get_webhook", parameters(("id" = "$response.body#/id")), description = "The webhook's status.")))),
        (status = 400, description = "A body labelled JSON that is not JSON, bad framing (Transfer-Encoding other than chunked, or with Content-Length), a blank or unreadable Idempotency-Key or tenant, or a destination header that is not text.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No key, an unknown one or an expired one (with [[tenants]]).", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`, with `error=\"invalid_token\"` when a key was sent"))),
        (status = 403, description = "The caller's tenant may not post to that destination (configured or not).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name is configured (for a tenant that may use every one).", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body did not arrive within body_read_timeout.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A request with this Idempotency-Key is still being admitted.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over max_body_bytes.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "This Idempotency-Key was used with another body or destination (key-reused), or no destination is named where the caller may use several (missing-destination).", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The tenant is over its quota.", body = Problem, content_type = "application/problem+json",
            headers(
                ("Retry-After" = u64, description = "Seconds until the quota has room."),
                ("RateLimit" = String, description = "The refusing limit's state (draft-ietf-httpapi-ratelimit-headers)."),
                ("RateLimit-Policy" = String, description = "The refusing limit's policy."),
            )),
        (status = 503, description = "Overloaded (the destination's queue or the byte budget is full), the journal or dead-letter file cannot take it, the quota store is unavailable, the relay is shutting down, or the listener serves its most connections; with queue = redis, also unreplicated (queued, fewer replicas confirmed it) or unanswered (Redis did not answer in time: perhaps queued, under the id the detail names): retry those with the same Idempotency-Key.", body = Problem, content_type = "application/problem+json",
            headers(
                ("Retry-After" = u64, description = "Seconds until a retry may be taken."),
                ("RateLimit" = String, description = "The full queue's state, when a queue refused."),
                ("RateLimit-Policy" = String, description = "The full queue's policy, when a queue refused."),
            )),
    ))]
async fn deliver(State(intake): State<Arc<Intake>>, request: Request) -> Response {
    let chunked = request.headers().contains_key(header::TRANSFER_ENCODING);
    // A client that hangs up drops this handler; the request path is then
    // finished in a task of its own (see `finish`), never left half way.
    let admission = finish::Finish::new(async move {
        // Made once the caller is known (a refused caller's traceparent
        // is not continued).
        let mut span = None;
        let (parts, body) = request.into_parts();
        let mut unread = Some(body);
        let mut resp = match take(&intake, &parts, &mut unread, &mut span).await {
            Ok(resp) => resp,
            Err(refusal) => *refusal,
        };
        if let Some(unread) = unread {
            intake
                .refused_unread(&parts.headers, unread, &mut resp)
                .await;
        }
        intake.answers.count(&resp);
        if let Some(span) = span {
            span.end(&resp);
        }
        resp
    });
    let mut resp = match admission.await {
        Some(resp) => resp,
        None => {
            tracing::error!("the intake's request path panicked");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the relay could not take this webhook; retry".into(),
                Vec::new(),
            )
        }
    };
    if chunked {
        // The listener stops scanning heads after one with
        // Transfer-Encoding (see `listener::framing`).
        body::close(&mut resp);
    }
    resp
}

/// A step's refusal: the answer to send instead of a 202.
type Refusal = Box<Response>;

/// The request path, each step's refusal as the error; with traces, the
/// intake span is made in `span` once the caller is known, and its context
/// kept with the webhook.
async fn take(
    intake: &Intake,
    parts: &axum::http::request::Parts,
    unread: &mut Option<axum::body::Body>,
    span: &mut Option<crate::trace::IntakeSpan>,
) -> Result<Response, Refusal> {
    let headers_in = &parts.headers;
    // 1. Who is calling: the key's tenant (401 without a good key), or on
    // an open relay the tenant header's.
    let caller = intake.caller(headers_in)?;
    let tenant = &caller.tenant;
    if let Some(traces) = &intake.traces {
        *span = Some(traces.intake(headers_in));
    }
    // Size limits and header checks.
    let both_lengths = parts
        .extensions
        .get::<Framing>()
        .is_some_and(Framing::both_lengths);
    let announced = body::check_framing(headers_in, both_lengths, intake.max_body_bytes)
        .map_err(|e| intake.body_refused(&e))?;
    let key = names::idempotency_key(headers_in).map_err(|e| bad_name("Idempotency-Key", e))?;
    // 2. The destination, if the caller may post there.
    let pass = intake.pick(headers_in, &caller)?;
    let destination = pass.name().clone();
    // While a webhook that failed could not be kept (the dead-letter file
    // takes no lines), refuse rather than promise, before the body is read
    // and held.
    if let Some(down) = intake.queue.not_keeping() {
        Answers::bump(&intake.answers.dead_letter_503);
        let wait = headers::spread_seconds(down.wait).to_string();
        return Err(Box::new(problem(
            StatusCode::SERVICE_UNAVAILABLE,
            down.kind,
            down.detail.into(),
            vec![("retry-after", wait)],
        )));
    }
    // 3. The body, held against the budget as it is read.
    let tenant_bytes = tenant.named.as_ref().map_or(0, String::len);
    let body = unread.take().unwrap_or_default();
    let (body, ticket) = intake.read_body(body, announced, tenant_bytes).await?;
    json::check(headers_in, &body)?;
    let content_type = headers_in
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut job = Job::new(
        body,
        content_type,
        tenant.named.clone(),
        destination.clone(),
        ticket,
    );
    job.trace = span.as_ref().map(crate::trace::IntakeSpan::context);
    // 4. Admission, by the queue.
    let admitted = intake
        .queue
        .admit(Admission {
            destination,
            tenant: caller.tenant,
            key,
            charged: caller.charged,
            job,
        })
        .await;
    drop(pass);
    // 5. 202, or the refusal.
    match admitted {
        Ok(a) => {
            if let Some(span) = span {
                span.taken(a.id());
            }
            Ok(accepted(&intake.answers, a))
        }
        Err(r) => Err(Box::new(refused(&intake.answers, r))),
    }
}

/// A header naming a key or tenant that cannot be taken: 400.
fn bad_name(what: &str, why: BadName) -> Refusal {
    let detail = match why {
        BadName::Twice => format!("the {what} {why}: give it once"),
        _ => format!("the {what} {why}: give 1 to 256 visible ASCII characters"),
    };
    let kind = match what {
        "tenant" => "bad-tenant",
        _ => "bad-idempotency-key",
    };
    refusal(StatusCode::BAD_REQUEST, kind, detail)
}

/// 202, naming the webhook by the id its receiver sees as `idempotency-key`.
fn accepted(answers: &Answers, a: crate::queue::Accepted) -> Response {
    use crate::queue::Accepted as A;
    let status = match a {
        A::Queued(_) => {
            Answers::bump(&answers.queued);
            "queued"
        }
        A::Deferred(_) => {
            Answers::bump(&answers.deferred);
            "deferred"
        }
        A::Duplicate(_) => {
            Answers::bump(&answers.duplicate);
            "duplicate"
        }
    };
    answers::accepted_202(status, a.id())
}

/// A refusal with a problem body and no header fields.
fn refusal(status: StatusCode, kind: &'static str, detail: String) -> Refusal {
    Box::new(problem(status, kind, detail, Vec::new()))
}

impl Intake {
    /// Bytes for a job (`bytes` of body and tenant name, and its
    /// bookkeeping), the queue forgetting its oldest idempotency keys if
    /// that makes room.
    fn hold(&self, bytes: u64) -> Option<Ticket> {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        self.budget.try_take(bytes).or_else(|| {
            self.queue
                .make_room((bytes as u64).saturating_add(JOB_OVERHEAD));
            self.budget.try_take(bytes)
        })
    }

    /// 503: the byte budget has no room.
    fn no_room(&self) -> Refusal {
        let no_room =
            crate::queue::Refusal::after(crate::queue::Cause::NoRoom, self.queue.drain_wait());
        Box::new(refused(&self.answers, no_room))
    }

    /// A body refused, counted.
    fn body_refused(&self, e: &BodyError) -> Refusal {
        if matches!(e, BodyError::TooLarge(_)) {
            Answers::bump(&self.answers.too_large_413);
        }
        Box::new(e.answer())
    }

    /// A request refused before its body was read: the body is read and
    /// dropped (an announced length within the limit, within the body
    /// timeout), so the client, still sending it, reads the answer and
    /// keeps its connection; else (chunks, more than the limit, too slow)
    /// the answer says the connection closes, which it then does.
    pub(crate) async fn refused_unread(
        &self,
        headers: &axum::http::HeaderMap,
        unread: axum::body::Body,
        resp: &mut Response,
    ) {
        if !body::has_body(headers) {
            return;
        }
        if !body::drain(headers, unread, self.max_body_bytes, self.body_read_timeout).await {
            body::close(resp);
        }
    }

    /// Reads the body, holding its bytes (and the tenant name's) against
    /// the budget from before the first byte: the announced length, or the
    /// limit for a chunked body, given back down to what came.
    async fn read_body(
        &self,
        body: axum::body::Body,
        announced: Option<u64>,
        tenant_bytes: usize,
    ) -> Result<(Bytes, Ticket), Refusal> {
        let expect = announced.unwrap_or(self.max_body_bytes);
        let mut ticket = self
            .hold(expect.saturating_add(tenant_bytes as u64))
            .ok_or_else(|| self.no_room())?;
        let bytes = body::read(body, self.max_body_bytes, self.body_read_timeout)
            .await
            .map_err(|e| self.body_refused(&e))?;
        ticket.shrink_to((bytes.len() + tenant_bytes) as u64 + JOB_OVERHEAD);
        Ok((bytes, ticket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct route answers the path the document and the router give.
    #[test]
    fn the_direct_route_is_the_documented_one() {
        let (_, api) = routes().split_for_parts();
        let item = api.paths.paths.get(DELIVER_PATH).expect("documented");
        assert!(item.post.is_some());
    }
}
