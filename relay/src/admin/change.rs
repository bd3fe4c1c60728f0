//! `PUT /v1/destinations/{name}` and `DELETE /v1/destinations/{name}`:
//! destinations made, changed and deleted while webhooks flow.
//!
//! - `PUT` makes the destination or replaces it whole (a field left out
//!   goes back to its setting; a secret left out of a destination that
//!   has one is a 422: `null` removes it), checked as
//!   the configuration is checked (the address guard among it): 201 when
//!   made, 200 when changed, 422 with what is wrong. A new rate, ceiling or
//!   budget applies at once to an active destination whose ring holds a
//!   full budget at it (else 422, nothing changed); the URL and secrets
//!   apply from the next attempt. A destination made here is named (its own
//!   metric labels) and counts in `max_destinations`.
//! - `PATCH` changes what a JSON merge patch (RFC 7396) names and nothing
//!   else: `null` removes a field (a secret: no signing); it never makes a
//!   destination (404).
//! - Every change is linearizable: resolved against the destination as
//!   the queue holds it at the moment it writes ([`crate::queue::Queue::change`]),
//!   so two changes at once both apply, in some order, and a destination
//!   deleted meanwhile is never made again by a `PATCH`. Each answer
//!   carries the destination's `ETag`; `If-Match` (and `If-None-Match: *`
//!   on a `PUT`) make a change conditional: 412 when it no longer holds.
//! - `DELETE` closes it to new webhooks at once (404 from then), lets it
//!   deliver what it holds within the shutdown grace, then dead-letters the
//!   rest: never lost. It answers 202 with what it still held.
//!
//! The queue makes the change: with the local engine it is written to the
//! registry before the answer, so a restart keeps it (without a state
//! file, `no_journal` without `state_dir`, both answer 409); with `queue =
//! redis` it is the fleet's, written to Redis and applied by every relay
//! within a second. Once shutdown has begun, 503. Both check the
//! destination's limits as its configuration is checked
//! ([`crate::domain::limits`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use axum::http::HeaderMap;

use super::Admin;
use super::change_answers::{precondition, read_body, refusal, tagged, unprocessable};
use crate::catalog::edit::{Edit, Precondition, Replacement, merge};
use crate::config::{Fields, path_name};
use crate::domain::problem::problem;
use crate::domain::schemas::{Deleting, Problem};
use crate::queue::{Changed, Put};

/// A destination as `PUT` gives it: the whole of it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DestinationPut {
    /// Where its webhooks are POSTed: `http://` or `https://`, at an
    /// address the allow list lets deliveries reach.
    #[schema(
        example = "https://billing.example.com/hooks",
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"
    )]
    url: String,
    /// Its drain rate, webhooks/s (absent: `drain_rate`).
    #[schema(exclusive_minimum = 0.0)]
    rate: Option<f64>,
    /// Its highest rate, webhooks/s (the AIMD ceiling when adaptive).
    #[schema(exclusive_minimum = 0.0)]
    ceiling: Option<f64>,
    /// Its latency budget, e.g. `"2s"` (absent: `latency_budget`).
    #[schema(example = "2s")]
    budget: Option<String>,
    /// A Standard Webhooks signing secret, `whsec_` + base64 (not empty).
    /// Left out on a destination that signs, the `PUT` is refused (422):
    /// give it again, or `null` to stop signing.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable = true, pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$")]
    secret: Option<Option<String>>,
    /// The secret being replaced (needs `secret`): each delivery is signed
    /// with both. Left out while the destination has one, the `PUT` is
    /// refused (422): give it again, or `null` to end the change of secret.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable = true, pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$")]
    previous_secret: Option<Option<String>>,
    /// Whether it has its own metric series (label `destination` = its
    /// name); absent: no, it is summed into `_other` (the busiest are
    /// shown by `dripfeed_relay_busiest` whatever this says).
    metrics: Option<bool>,
    /// The application whose endpoint it is (1 to 64 of `A-Z a-z 0-9 . _
    /// -`; it must exist: 404 `unknown-application`, make it first with
    /// `PUT /v1/applications/{app}`). Fixed once set: a PUT that names
    /// another (or none) is a 422. Under
    /// `/v1/applications/{app}/endpoints` the path gives it.
    #[schema(
        example = "acme",
        pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$"
    )]
    application: Option<String>,
    /// The event types it takes: exact names (`invoice.paid`), prefixes
    /// (`invoice.*`) or `*`; absent or empty: every type.
    #[schema(example = json!(["invoice.*"]), max_items = 256)]
    event_types: Option<Vec<String>>,
    /// Equality on the payload's fields: each key a field's path (dotted:
    /// `customer.tier`), each value what it must equal. An event whose
    /// payload differs (or lacks one) is not sent to it.
    #[schema(value_type = Option<Object>, example = json!({"status": "paid"}))]
    filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// Disabled: it takes no new event (what it holds is still delivered).
    disabled: Option<bool>,
    /// What it is, for people (at most 1,024 bytes).
    #[schema(max_length = 1024)]
    description: Option<String>,
}

/// A field given (`Some`, `null` as `Some(None)`) or left out (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A JSON merge patch (RFC 7396) of a destination: each field given
/// replaces its value, `null` removes it (back to the setting; for a
/// secret, no signing); a field left out stays as it is.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Described (unknown fields refused), read as JSON.
pub(crate) struct DestinationPatch {
    /// Where its webhooks are POSTed: a string (it cannot be removed:
    /// `null` is refused).
    #[schema(
        example = "https://billing.example.com/hooks",
        nullable = false,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"
    )]
    url: Option<String>,
    /// Its drain rate, webhooks/s.
    #[schema(exclusive_minimum = 0.0, nullable = true)]
    rate: Option<f64>,
    /// Its highest rate, webhooks/s.
    #[schema(exclusive_minimum = 0.0, nullable = true)]
    ceiling: Option<f64>,
    /// Its latency budget, e.g. `"2s"`.
    #[schema(example = "2s", nullable = true)]
    budget: Option<String>,
    /// Its signing secret, `whsec_` + base64; `null`: no signing.
    #[schema(
        nullable = true,
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    secret: Option<String>,
    /// The secret being replaced; `null`: the change of secret is over.
    #[schema(
        nullable = true,
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    previous_secret: Option<String>,
    /// Whether it has its own metric series; `null`: as its origin decides.
    #[schema(nullable = true)]
    metrics: Option<bool>,
    /// The application whose endpoint it is; it cannot be changed (delete
    /// the endpoint and make it under the other application).
    #[schema(nullable = false)]
    application: Option<String>,
    /// The event types it takes; `null`: every type.
    #[schema(nullable = true)]
    event_types: Option<Vec<String>>,
    /// Equality on the payload's fields; `null`: no filter.
    #[schema(value_type = Option<Object>, nullable = true)]
    filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// Disabled: it takes no new event; `null`: enabled.
    #[schema(nullable = true)]
    disabled: Option<bool>,
    /// What it is; `null`: none.
    #[schema(nullable = true)]
    description: Option<String>,
}

/// The body as JSON, or its 400.
fn json_of(body: &[u8]) -> Result<serde_json::Value, Box<Response>> {
    serde_json::from_slice::<serde_json::Value>(body).map_err(|e| {
        let detail = format!("the body is not JSON: {e}");
        Box::new(problem(
            StatusCode::BAD_REQUEST,
            "bad-json",
            detail,
            Vec::new(),
        ))
    })
}

/// A name that cannot be a destination's: 422.
fn bad_name(name: &str) -> Option<Response> {
    (!path_name(name)).then(|| {
        let detail =
            "a destination name is 1 to 64 of A-Z a-z 0-9 . _ -, other than . and ..".to_owned();
        unprocessable("bad-destination", detail)
    })
}

/// `PUT /v1/destinations/{name}`.
#[utoipa::path(put, path = "/v1/destinations/{name}", tag = "admin", operation_id = "put_destination",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$", description = "The destination's name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not `.` or `..`."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Change it only if its entity tag (`ETag`) is one of these (comma-separated), or `*`: only if it exists; empty: no condition."),
        ("If-None-Match" = Option<String>, Header, pattern = "^ *\\*? *$", nullable = false, description = "`*`: make it only if it does not exist (empty: no condition)."),
    ),
    request_body(content = DestinationPut, content_type = "application/json"),
    responses(
        (status = 200, description = "Changed: its view, without secrets.", body = super::destinations::DestinationView,
            headers(("ETag" = String, description = "Its entity tag now: give it as If-Match to change it only if nobody else did meanwhile."))),
        (status = 201, description = "Made: its view, without secrets.", body = super::destinations::DestinationView,
            headers(("ETag" = String, description = "Its entity tag."))),
        (status = 400, description = "The body is not JSON, or If-Match or If-None-Match does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "It names an application that does not exist (make it first: PUT /v1/applications/{app}).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It is being deleted (with queue = redis: until the fleet has ended it, its grace and 5 s), an older destination of that name is still draining, the relay has no registry (no_journal without state_dir), or (with queue = redis) other relays changed it again and again meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match or If-None-Match does not hold: it was changed, made or deleted meanwhile (nothing changed).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the admin API takes (64 KiB).", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad name, field or address, a rate its ring cannot hold, max_destinations reached, or a secret left out of a destination that has one (give it, or null to stop signing).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry (with queue = redis: Redis) cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn put(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    put_as(admin, name, headers, body).await
}

/// [`put`]'s work, for its route and the application's endpoints' route.
/// An application it names must exist: 404, as the endpoints' route
/// answers (a typo does not make a customer, and a `PUT` racing the
/// application's deletion never makes it again).
pub(crate) async fn put_as(
    admin: Arc<Admin>,
    name: String,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(refused) = bad_name(&name) {
        return refused;
    }
    let body = match read_body(body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let pre = match precondition(&headers) {
        Ok(pre) => pre,
        Err(refused) => return *refused,
    };
    let given: DestinationPut = match json_of(&body).map(serde_json::from_value) {
        Err(refused) => return *refused,
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return unprocessable("bad-destination", format!("the body does not read: {e}"));
        }
    };
    let fields = Fields {
        name: Some(name.clone()),
        url: Some(given.url),
        rate: given.rate,
        ceiling: given.ceiling,
        budget: given.budget,
        secret: None,
        previous_secret: None,
        metrics: given.metrics,
        application: given.application,
        event_types: given.event_types,
        filter: given.filter,
        disabled: given.disabled,
        description: given.description,
    };
    // Its shape first, whatever the destination is now: a bad body is a
    // 422 before any precondition.
    let whole = Fields {
        secret: given.secret.clone().flatten(),
        previous_secret: given.previous_secret.clone().flatten(),
        ..fields.clone()
    };
    if let Err(detail) = whole.check_each() {
        return unprocessable("bad-destination", detail);
    }
    let edit = Edit::Replace(Replacement {
        fields,
        secret: given.secret,
        previous_secret: given.previous_secret,
    });
    change(&admin, &name, edit, &pre).await
}

/// `PATCH /v1/destinations/{name}`.
#[utoipa::path(patch, path = "/v1/destinations/{name}", tag = "admin", operation_id = "patch_destination",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$", description = "The destination's name."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Change it only if its entity tag (`ETag`) is one of these (comma-separated; `*`: any)."),
    ),
    request_body(content = DestinationPatch, content_type = "application/merge-patch+json",
        description = "A JSON merge patch (RFC 7396): what it names changes, null removes, the rest stays. application/json is taken too."),
    responses(
        (status = 200, description = "Changed: its view, without secrets.", body = super::destinations::DestinationView,
            headers(("ETag" = String, description = "Its entity tag now."))),
        (status = 400, description = "The body is not JSON, or If-Match does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name (or it is being deleted): a patch never makes one.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no registry (no_journal without state_dir), or (with queue = redis) other relays changed it again and again meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match does not hold: it was changed or deleted meanwhile (nothing changed).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the admin API takes (64 KiB).", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a JSON object, an unknown field, or the destination it makes is refused as a PUT's would be.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry (with queue = redis: Redis) cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn patch(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(refused) = bad_name(&name) {
        return refused;
    }
    let body = match read_body(body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let pre = match precondition(&headers) {
        Ok(pre) => pre,
        Err(refused) => return *refused,
    };
    let patch = match json_of(&body) {
        Err(refused) => return *refused,
        Ok(serde_json::Value::Object(p)) => p,
        Ok(_) => {
            return unprocessable("bad-destination", "a merge patch is a JSON object".into());
        }
    };
    // Its shape first (an unknown field, a field's type or value),
    // whatever the destination is now: a bad body is a 422 before any
    // precondition.
    // An endpoint's fields (event_types, disabled, ...) are checked as an
    // endpoint's: whether this destination is one is the merge's to say,
    // onto what it is now.
    let mut shape = Fields {
        application: match patch.get("application") {
            // Named as it is: the merge onto what it is now says whether.
            Some(serde_json::Value::String(app)) => Some(app.clone()),
            Some(_) => None,
            None => Some("shape".to_owned()),
        },
        ..Fields::default()
    };
    if let Err(detail) = merge(&mut shape, patch.clone()).and_then(|()| shape.check_each()) {
        return unprocessable("bad-destination", detail);
    }
    change(&admin, &name, Edit::Merge(patch), &pre).await
}

/// A destination made or changed by `edit` under `pre`: the queue
/// resolves, checks and writes it at once (see
/// [`crate::queue::Queue::change`]); its view with its `ETag`, or the
/// refusal.
async fn change(admin: &Admin, name: &str, edit: Edit, pre: &Precondition) -> Response {
    if admin.catalog.is_closing() {
        return refusal(crate::queue::ChangeRefused::closing());
    }
    let Changed { put, etag } = match admin.queue.change(name, edit, pre, &admin.vetter).await {
        Ok(changed) => changed,
        Err(refused) => return refusal(refused),
    };
    let Some(view) = admin.view(name).await else {
        return refusal(crate::queue::ChangeRefused::unknown());
    };
    let status = match put {
        Put::Made => StatusCode::CREATED,
        Put::Changed => StatusCode::OK,
    };
    tagged((status, Json(view)).into_response(), &etag)
}

/// `DELETE /v1/destinations/{name}`.
#[utoipa::path(delete, path = "/v1/destinations/{name}", tag = "admin", operation_id = "delete_destination",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, description = "The destination's name."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Delete it only if its entity tag (`ETag`) is one of these (comma-separated; `*`: any)."),
    ),
    responses(
        (status = 202, description = "Closed to new webhooks; what it holds is delivered within the grace, then dead-lettered.", body = Deleting),
        (status = 400, description = "If-Match does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name (or it is already being deleted).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no registry (no_journal without state_dir), or (with queue = redis) other relays changed it again and again meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match does not hold: it was changed meanwhile (nothing deleted).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry (with queue = redis: Redis) cannot be written (nothing changed), or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn delete(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let pre = match precondition(&headers) {
        Ok(pre) => pre,
        Err(refused) => return *refused,
    };
    match admin.queue.delete(&name, &pre).await {
        Ok(body) => {
            admin.errors.forget(&name);
            admin.recents.forget(&name);
            (StatusCode::ACCEPTED, Json(body)).into_response()
        }
        Err(refused) => refusal(refused),
    }
}
