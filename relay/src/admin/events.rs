//! Events on the admin API: an application's events (newest first), one
//! event with each endpoint's copy and every attempt, an endpoint's
//! attempts (newest first, failed or delivered), and sending again:
//! `resend` one event to one endpoint, `recover` an endpoint's
//! dead-lettered copies in a time window (Svix's `recover {since,
//! until}`). Each goes through the endpoint's bucket like any copy.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Admin;
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;
use crate::events::read::Page;
use crate::events::record::{AttemptRecord, CopyRecord, CopyState, EventRecord};
use crate::queue::events::SendAgain;

/// One delivery attempt.
#[derive(Serialize, ToSchema)]
pub(crate) struct AttemptView {
    /// When it started, ms since the Unix epoch.
    at_ms: u64,
    /// The receiver's status; 0: no answer.
    status: u16,
    /// How long it took, ms.
    duration_ms: u64,
    /// Its error's kind when it failed: `dns`, `connect`, `tls`,
    /// `timeout`, `closed`, `status`, `too_large`, `refused`, `stopped`
    /// (no answer awaited: the relay stopped at the end of its grace).
    error: Option<String>,
    /// The first bytes of the receiver's answer, when kept.
    response: Option<String>,
}

impl From<AttemptRecord> for AttemptView {
    fn from(a: AttemptRecord) -> Self {
        AttemptView {
            at_ms: a.at_ms,
            status: a.status,
            duration_ms: a.duration_ms,
            error: a.error,
            response: a.response,
        }
    }
}

/// One endpoint's copy of an event.
#[derive(Serialize, ToSchema)]
pub(crate) struct CopyView {
    /// The endpoint.
    endpoint: String,
    /// `pending` (queued, waiting for a retry, or in flight), `delivered`
    /// or `dead_lettered`.
    #[schema(example = "delivered")]
    state: &'static str,
    /// Why it was dead-lettered: `failed` (retries spent, or a final answer),
    /// `overflow`, `expired`, `shutdown`, `destination-deleted`,
    /// `application-deleted`…
    reason: Option<String>,
    /// Times it was sent again (resend, recover).
    resent: u32,
    /// Its attempts, oldest first (the latest 64).
    attempts: Vec<AttemptView>,
}

fn state_name(s: CopyState) -> &'static str {
    match s {
        CopyState::Pending => "pending",
        CopyState::Delivered => "delivered",
        CopyState::DeadLettered => "dead_lettered",
    }
}

fn copy_view(endpoint: String, c: CopyRecord) -> CopyView {
    CopyView {
        endpoint,
        state: state_name(c.state),
        reason: c.reason,
        resent: c.resent,
        attempts: c.attempts.into_iter().map(AttemptView::from).collect(),
    }
}

/// An event.
#[derive(Serialize, ToSchema)]
pub(crate) struct EventView {
    /// Its id (each copy's `webhook-id`).
    #[schema(example = "1764338411000000001")]
    id: String,
    /// Its application.
    application: String,
    /// Its type.
    #[serde(rename = "type")]
    #[schema(example = "invoice.paid")]
    kind: String,
    /// When it was taken, ms since the Unix epoch.
    created_at_ms: u64,
    /// The tenant that posted it.
    tenant: Option<String>,
    /// The endpoints it went to.
    endpoints: usize,
    /// Its payload as posted, any JSON (`GET` of one event only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Value, required = false)]
    payload: Option<Box<serde_json::value::RawValue>>,
    /// Each endpoint's copy (`GET` of one event only).
    #[serde(skip_serializing_if = "Option::is_none")]
    copies: Option<Vec<CopyView>>,
}

fn event_view(id: u64, r: EventRecord) -> EventView {
    EventView {
        id: id.to_string(),
        application: r.app,
        kind: r.kind,
        created_at_ms: r.created_ms,
        tenant: r.tenant,
        endpoints: r.copies.len(),
        payload: None,
        copies: None,
    }
}

/// A page of events, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct EventList {
    events: Vec<EventView>,
    /// Where the next (older) page starts (`cursor`); `null` on the last.
    /// With a `type`, a page reads at most 10,000 events: it may hold
    /// fewer than `limit` (none, even) and name a next one; follow the
    /// cursor until it is `null`.
    next_cursor: Option<String>,
}

/// One copy of an endpoint's, with its event.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndpointCopy {
    /// The event's id.
    event: String,
    /// Its type.
    #[serde(rename = "type")]
    kind: String,
    #[serde(flatten)]
    copy: CopyView,
}

/// A page of an endpoint's copies, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct AttemptList {
    copies: Vec<EndpointCopy>,
    /// Where the next (older) page starts (`cursor`); `null` on the last.
    /// A page reads at most 10,000 of the application's events: it may
    /// hold fewer than `limit` (none, even) and name a next one; follow
    /// the cursor until it is `null`.
    next_cursor: Option<String>,
}

fn unreadable(e: String) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "events-unreadable",
        e,
        Vec::new(),
    )
}

fn not_found(what: &str) -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "unknown-event",
        format!("no {what}"),
        Vec::new(),
    )
}

fn no_endpoint() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "unknown-destination",
        "no endpoint of that name in this application".to_owned(),
        Vec::new(),
    )
}

/// The first event id application `app` owns (see
/// [`App::since`](crate::catalog::App)), or `None` if there is no
/// application of that name.
fn own_since(admin: &Admin, app: &str) -> Option<u64> {
    admin.catalog.app(app).map(|a| a.since)
}

/// Event `id` of application `app`, when it is a number from the
/// application's `since` on (see [`own_since`]); else the 404.
fn own_event(admin: &Admin, app: &str, id: &str) -> Result<u64, Box<Response>> {
    let since = own_since(admin, app)
        .ok_or_else(|| Box::new(super::change_answers::unknown_application()))?;
    id.parse::<u64>()
        .ok()
        .filter(|&id| id >= since)
        .ok_or_else(|| Box::new(not_found("such event")))
}

/// A page's items that are the application's own (ids from `since`); the
/// page ends where an earlier application's begin (ids fall, newest first).
fn owned<T>(page: Page<T>, since: u64, id: impl Fn(&T) -> u64) -> Page<T> {
    let all = page.items.len();
    let items: Vec<T> = page.items.into_iter().filter(|t| id(t) >= since).collect();
    // Nothing of its own is left before a cursor at or under `since`.
    let next = match items.len() < all {
        true => None,
        false => page.next.filter(|&before| before > since),
    };
    Page { items, next }
}

/// `GET /v1/applications/{app}/events`.
#[utoipa::path(get, path = "/v1/applications/{app}/events", tag = "events", operation_id = "list_events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("type" = Option<String>, Query, description = "Only events of this type."),
        ("limit" = Option<u32>, Query, description = "Events in the page (default 100, most 1000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^[0-9]{1,20}$", nullable = false, description = "Where to continue: a next_cursor an earlier page gave (an event id: the page goes on with the events before it, whether or not that event is still kept)."),
    ),
    responses(
        (status = 200, description = "A page of the application's events, newest first.", body = EventList),
        (status = 400, description = "A limit that is not a number from 1 to 1000, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor that is not an event id (1 to 20 digits).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The events store cannot be read (on disk; with queue = redis: in Redis), or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(
    State(admin): State<Arc<Admin>>,
    Path(app): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(since) = own_since(&admin, &app) else {
        return super::change_answers::unknown_application();
    };
    let q = match super::paging::parse(raw.as_deref(), 100, 1000, &["type"]) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    let before = match super::paging::place(q.cursor.as_deref()) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    match admin
        .queue
        .events()
        .list(&app, q.filter("type"), before, q.limit)
        .await
        .map(|page| owned(page, since, |(id, _)| *id))
    {
        Ok(page) => Json(EventList {
            events: page
                .items
                .into_iter()
                .map(|(id, r)| event_view(id, r))
                .collect(),
            next_cursor: page.next.map(|n| n.to_string()),
        })
        .into_response(),
        Err(e) => unreadable(e),
    }
}

/// `GET /v1/applications/{app}/events/{id}`.
#[utoipa::path(get, path = "/v1/applications/{app}/events/{id}", tag = "events", operation_id = "get_event",
    security(("admin_token" = [])),
    params(("app" = String, Path, description = "The application."), ("id" = String, Path, description = "The event's id.", pattern = "^[0-9]{1,20}$")),
    responses(
        (status = 200, description = "The event, its payload, and each endpoint's copy with every attempt.", body = EventView),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application (unknown-application), or no such event in it (unknown-event; or no longer kept: event_retention).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The events store cannot be read, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn one(
    State(admin): State<Arc<Admin>>,
    Path((app, id)): Path<(String, String)>,
) -> Response {
    let id = match own_event(&admin, &app, &id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match admin.queue.events().event(&app, id).await {
        Ok(Some((r, copies))) if r.app == app => {
            let mut view = event_view(id, r);
            let payload = admin.queue.events().payload(&app, id).await.ok().flatten();
            // Its bytes as posted (numbers, key order and all), not as
            // parsed again.
            view.payload = payload
                .and_then(|p| String::from_utf8(p.to_vec()).ok())
                .and_then(|p| serde_json::value::RawValue::from_string(p).ok());
            view.copies = Some(copies.into_iter().map(|(n, c)| copy_view(n, c)).collect());
            Json(view).into_response()
        }
        Ok(_) => not_found("such event in this application"),
        Err(e) => unreadable(e),
    }
}

/// `GET /v1/applications/{app}/endpoints/{name}/attempts`.
#[utoipa::path(get, path = "/v1/applications/{app}/endpoints/{name}/attempts", tag = "events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("name" = String, Path, description = "The endpoint."),
        ("outcome" = Option<String>, Query, description = "failed (its last attempt failed, or dead-lettered) or delivered.", pattern = "^(failed|delivered)$"),
        ("limit" = Option<u32>, Query, description = "Copies in the page (default 100, most 1000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^[0-9]{1,20}$", nullable = false, description = "Where to continue: a next_cursor an earlier page gave (an event id: the page goes on with the events before it, whether or not that event is still kept)."),
    ),
    responses(
        (status = 200, description = "The endpoint's copies, newest first, each with its attempts.", body = AttemptList),
        (status = 400, description = "A limit or outcome that is not one, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application (unknown-application), or no endpoint of that name in it (unknown-destination).", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor that is not an event id (1 to 20 digits).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The events store cannot be read, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn attempts(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(since) = own_since(&admin, &app) else {
        return super::change_answers::unknown_application();
    };
    if !is_endpoint_of(&admin, &app, &name) {
        return no_endpoint();
    }
    let q = match super::paging::parse(raw.as_deref(), 100, 1000, &["outcome"]) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    let failed = match q.filter("outcome") {
        None => None,
        Some("failed") => Some(true),
        Some("delivered") => Some(false),
        Some(_) => return *super::paging::bad("outcome must be failed or delivered"),
    };
    let before = match super::paging::place(q.cursor.as_deref()) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    match admin
        .queue
        .events()
        .copies(&app, &name, failed, before, q.limit)
        .await
        .map(|page| owned(page, since, |(id, _, _)| *id))
    {
        Ok(page) => Json(AttemptList {
            copies: page
                .items
                .into_iter()
                .map(|(id, kind, c)| EndpointCopy {
                    event: id.to_string(),
                    kind,
                    copy: copy_view(name.clone(), c),
                })
                .collect(),
            next_cursor: page.next.map(|n| n.to_string()),
        })
        .into_response(),
        Err(e) => unreadable(e),
    }
}

/// Whether `name` is an endpoint of `app` (held, open or not).
fn is_endpoint_of(admin: &Admin, app: &str, name: &str) -> bool {
    admin
        .catalog
        .get(name)
        .and_then(|l| l.dest.endpoint.clone())
        .is_some_and(|e| &*e.application == app)
}

/// `POST /v1/applications/{app}/events/{id}/resend`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Resend {
    /// The endpoint to send the event to again.
    endpoint: String,
}

/// `POST /v1/applications/{app}/endpoints/{name}/recover`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Recover {
    /// From when (RFC 3339, e.g. `2026-11-28T10:00:00Z`): events taken
    /// since then.
    #[schema(example = "2026-11-28T10:00:00Z")]
    since: String,
    /// Until when (RFC 3339); absent: now.
    until: Option<String>,
}

/// How many were sent again.
#[derive(Serialize, ToSchema)]
pub(crate) struct SentAgain {
    /// Copies sent again.
    sent: usize,
    /// More dead-lettered copies are left in the window (a recover sends
    /// at most 10,000): ask again.
    more: bool,
}

fn send_again_refused(e: SendAgain) -> Response {
    let (status, kind, detail) = match e {
        SendAgain::NotFound => (
            StatusCode::NOT_FOUND,
            "unknown-event",
            "no such event, or it has no copy for that endpoint".to_owned(),
        ),
        SendAgain::Gone => (
            StatusCode::NOT_FOUND,
            "unknown-destination",
            "no endpoint of that name (or it is being deleted)".to_owned(),
        ),
        SendAgain::Pending => (
            StatusCode::CONFLICT,
            "copy-pending",
            "that copy is still on its way: it can be sent again once it has ended".to_owned(),
        ),
        SendAgain::Failed(e) => (StatusCode::SERVICE_UNAVAILABLE, "events-unreadable", e),
    };
    problem(status, kind, detail, Vec::new())
}

/// The body read as `T`, or its answer.
fn body_of<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, Box<Response>> {
    let body = super::change_answers::read_body(body)?;
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        Box::new(problem(
            StatusCode::BAD_REQUEST,
            "bad-json",
            format!("the body is not JSON: {e}"),
            Vec::new(),
        ))
    })?;
    if !v.is_object() {
        return Err(Box::new(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad-request",
            "the body is a JSON object".to_owned(),
            Vec::new(),
        )));
    }
    serde_json::from_value(v).map_err(|e| {
        Box::new(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad-request",
            e.to_string(),
            Vec::new(),
        ))
    })
}

/// `POST /v1/applications/{app}/events/{id}/resend`.
#[utoipa::path(post, path = "/v1/applications/{app}/events/{id}/resend", tag = "events",
    security(("admin_token" = [])),
    params(("app" = String, Path, description = "The application."), ("id" = String, Path, description = "The event's id.", pattern = "^[0-9]{1,20}$")),
    request_body(content = Resend, content_type = "application/json"),
    responses(
        (status = 202, description = "Sent again: queued to the endpoint (through its bucket); while its queue is full, the copy waits for room (listed pending).", body = SentAgain),
        (status = 400, description = "A body that is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application (unknown-application), no such event in it or no copy of it for that endpoint (unknown-event), or no such endpoint (unknown-destination).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "That copy is still on its way.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a resend ({\"endpoint\": \"...\"}).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The events store cannot be read, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn resend(
    State(admin): State<Arc<Admin>>,
    Path((app, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let given: Resend = match body_of(body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let id = match own_event(&admin, &app, &id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match admin.queue.events().event(&app, id).await {
        Ok(Some((r, _))) if r.app == app => {}
        Ok(_) => return not_found("such event in this application"),
        Err(e) => return unreadable(e),
    }
    if !is_endpoint_of(&admin, &app, &given.endpoint) {
        return no_endpoint();
    }
    match admin.queue.events().resend(&app, id, &given.endpoint).await {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(SentAgain {
                sent: 1,
                more: false,
            }),
        )
            .into_response(),
        Err(e) => send_again_refused(e),
    }
}

/// `POST /v1/applications/{app}/endpoints/{name}/recover`.
#[utoipa::path(post, path = "/v1/applications/{app}/endpoints/{name}/recover", tag = "events",
    security(("admin_token" = [])),
    params(("app" = String, Path, description = "The application."), ("name" = String, Path, description = "The endpoint.")),
    request_body(content = Recover, content_type = "application/json"),
    responses(
        (status = 202, description = "The endpoint's dead-lettered copies of events taken in the window, sent again (through its bucket; those its queue has no room for wait for it, listed pending): how many.", body = SentAgain),
        (status = 400, description = "A body that is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application (unknown-application), or no endpoint of that name in it (unknown-destination).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a window (since, and until if given, RFC 3339; since before until).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The events store cannot be read, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn recover(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let given: Recover = match body_of(body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let Some(own) = own_since(&admin, &app) else {
        return super::change_answers::unknown_application();
    };
    if !is_endpoint_of(&admin, &app, &name) {
        return no_endpoint();
    }
    let at = rfc3339_ms;
    let bad = |what: &str| {
        problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad-window",
            what.to_owned(),
            Vec::new(),
        )
    };
    let Some(since) = at(&given.since) else {
        return bad(
            "since: an RFC 3339 time from 1970 on, with its zone, e.g. 2026-11-28T10:00:00Z",
        );
    };
    let until = match given.until.as_deref().map(at) {
        None => crate::domain::job::unix_ms(),
        Some(Some(u)) => u,
        Some(None) => {
            return bad(
                "until: an RFC 3339 time from 1970 on, with its zone, e.g. 2026-11-28T12:00:00Z",
            );
        }
    };
    if since > until {
        return bad("since is after until");
    }
    let (from, to) = (
        crate::events::id::id_at(since).max(own),
        crate::events::id::id_at(until.saturating_add(1)),
    );
    match admin.queue.events().recover(&app, &name, (from, to)).await {
        Ok((sent, more)) => (StatusCode::ACCEPTED, Json(SentAgain { sent, more })).into_response(),
        Err(e) => send_again_refused(e),
    }
}

/// An RFC 3339 time (`2026-11-28T10:00:00Z`, `2026-11-28T11:00:00+01:00`,
/// fractions of a second too) in ms since the Unix epoch.
fn rfc3339_ms(text: &str) -> Option<u64> {
    // RFC 3339 takes `t` and `z` as `T` and `Z` (§5.6).
    let upper = text.trim().to_ascii_uppercase();
    let text = upper.as_str();
    let tail = text
        .len()
        .checked_sub(6)
        .and_then(|at| Some((at, text.get(at..)?)));
    let (utc, offset_s) = match tail {
        Some((at, tail))
            if (tail.starts_with('+') || tail.starts_with('-'))
                && tail.as_bytes().get(3) == Some(&b':') =>
        {
            let hours: i64 = tail.get(1..3)?.parse().ok()?;
            let minutes: i64 = tail.get(4..6)?.parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let sign = if tail.starts_with('-') { -1 } else { 1 };
            (
                format!("{}Z", text.get(..at)?),
                sign * (hours * 3600 + minutes * 60),
            )
        }
        // A time without its zone (`Z` or an offset) is not RFC 3339.
        _ if text.ends_with('Z') => (text.to_owned(), 0),
        _ => return None,
    };
    let since = humantime::parse_rfc3339_weak(&utc)
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let ms = i128::try_from(since.as_millis()).ok()? - i128::from(offset_s) * 1000;
    u64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::rfc3339_ms;

    #[test]
    fn times_with_an_offset_are_read() {
        let utc = rfc3339_ms("2026-11-28T10:00:00Z").unwrap();
        assert_eq!(utc, 1_795_860_000_000);
        assert_eq!(rfc3339_ms("2026-11-28T11:00:00+01:00"), Some(utc));
        assert_eq!(rfc3339_ms("2026-11-28T05:00:00-05:00"), Some(utc));
        assert_eq!(rfc3339_ms("2026-11-28T10:00:00+00:00"), Some(utc));
        assert_eq!(rfc3339_ms("2026-11-28T10:00:00.250Z"), Some(utc + 250));
        assert_eq!(rfc3339_ms("2026-11-28t10:00:00z"), Some(utc));
        assert_eq!(rfc3339_ms("2026-11-28T11:00:00.5+01:00"), Some(utc + 500));
        for bad in [
            "yesterday",
            "2026-11-28",
            "2026-11-28T10:00:00+24:00",
            "2026-11-28T10:00:00+01:60",
            "2026-11-28T10:00:00+é:00",
            "1970-01-01T00:00:00+01:00",
            "2026-11-28T10:00:00",
            "2026-11-28T10:00:00.5",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
    }
}
