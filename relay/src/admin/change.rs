//! `PUT /v1/destinations/{name}` and `DELETE /v1/destinations/{name}`:
//! destinations made, changed and deleted while webhooks flow.
//!
//! - `PUT` makes the destination or replaces it whole (a field left out
//!   goes back to its setting; a secret left out is no secret), checked as
//!   the configuration is checked (the address guard among it): 201 when
//!   made, 200 when changed, 422 with what is wrong. A new rate, ceiling or
//!   budget applies at once to an active destination whose ring holds a
//!   full budget at it (else 422, nothing changed); the URL and secrets
//!   apply from the next attempt. A destination made here is named (its own
//!   metric labels) and counts in `max_destinations`.
//! - `DELETE` closes it to new webhooks at once (404 from then), lets it
//!   deliver what it holds within the shutdown grace, then dead-letters the
//!   rest: never lost. It answers 202 with what it still held.
//!
//! The queue makes the change: with the local engine it is written to the
//! state file before the answer, so a restart keeps it (without a state
//! file, `no_journal` without `state_dir`, both answer 409); with `queue =
//! redis` it is the fleet's, written to Redis and applied by every relay
//! within a second. Once shutdown has begun, 503. Both check the
//! destination's limits as its configuration is checked
//! ([`crate::domain::limits`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::Admin;
use super::change_answers::{refusal, unprocessable};
use crate::config::{Fields, valid_name};
use crate::domain::problem::problem;
use crate::domain::schemas::{Deleting, Problem};
use crate::queue::Put;

/// A destination as `PUT` gives it: the whole of it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DestinationPut {
    /// Where its webhooks are POSTed: `http://` or `https://`, at an
    /// address the allow list lets deliveries reach.
    #[schema(example = "https://billing.example.com/hooks")]
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
    #[schema(
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    secret: Option<String>,
    /// The secret being replaced (needs `secret`): each delivery is signed
    /// with both.
    #[schema(
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    previous_secret: Option<String>,
}

/// `PUT /v1/destinations/{name}`.
#[utoipa::path(put, path = "/v1/destinations/{name}", tag = "admin",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The destination's name: 1 to 64 of `A-Z a-z 0-9 . _ -`.")),
    request_body(content = DestinationPut, content_type = "application/json"),
    responses(
        (status = 200, description = "Changed: its view, without secrets.", body = super::destinations::DestinationView),
        (status = 201, description = "Made: its view, without secrets.", body = super::destinations::DestinationView),
        (status = 400, description = "The body is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 409, description = "It is being deleted (with queue = redis: until the fleet has ended it, its grace and 5 s), an older destination of that name is still draining, the relay has no state file, or (with queue = redis) another relay changed it meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad name, field or address, a rate its ring cannot hold, or max_destinations reached.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The state file (with queue = redis: Redis) cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if !valid_name(&name) {
        let detail = "a destination name is 1 to 64 of A-Z a-z 0-9 . _ -".to_owned();
        return unprocessable("bad-destination", detail);
    }
    let given: DestinationPut = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => {
            let detail = format!("the body is not JSON: {e}");
            return problem(StatusCode::BAD_REQUEST, "bad-json", detail, Vec::new());
        }
        Ok(v) => match serde_json::from_value(v) {
            Ok(p) => p,
            Err(e) => {
                return unprocessable("bad-destination", format!("the body does not read: {e}"));
            }
        },
    };
    let fields = Fields {
        name: Some(name.clone()),
        url: Some(given.url),
        rate: given.rate,
        ceiling: given.ceiling,
        budget: given.budget,
        secret: given.secret,
        previous_secret: given.previous_secret,
    };
    if admin.catalog.is_closing() {
        return refusal(crate::queue::ChangeRefused::closing());
    }
    let dest = match fields.clone().check_body(&admin.origin) {
        Ok(dest) => dest,
        Err(detail) => return unprocessable("bad-destination", detail),
    };
    // The limits a configured destination is held to (domain::limits).
    if let Err(detail) = admin.queue.limits().check(&dest) {
        return unprocessable("bad-destination", detail);
    }
    // Before the queue's turn: a name's lookup may take seconds.
    if let Err(refused) = admin
        .guard
        .check_destination(&dest.url, admin.resolve)
        .await
    {
        let detail = format!(
            "{}: {refused}: allow it with --allow-destination-cidr {} (allow_destination_cidrs)",
            dest.url, refused.net
        );
        return unprocessable("private-destination", detail);
    }
    let put = match admin.queue.put(&name, fields, dest).await {
        Ok(put) => put,
        Err(refused) => return refusal(refused),
    };
    let Some(view) = admin.view(&name).await else {
        return refusal(crate::queue::ChangeRefused::unknown());
    };
    let status = match put {
        Put::Made => StatusCode::CREATED,
        Put::Changed => StatusCode::OK,
    };
    (status, Json(view)).into_response()
}

/// `DELETE /v1/destinations/{name}`.
#[utoipa::path(delete, path = "/v1/destinations/{name}", tag = "admin",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The destination's name.")),
    responses(
        (status = 202, description = "Closed to new webhooks; what it holds is delivered within the grace, then dead-lettered.", body = Deleting),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 404, description = "No destination of that name (or it is already being deleted).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no state file, or (with queue = redis) another relay changed it meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The state file (with queue = redis: Redis) cannot be written (nothing changed), or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete(State(admin): State<Arc<Admin>>, Path(name): Path<String>) -> Response {
    match admin.queue.delete(&name).await {
        Ok(body) => (StatusCode::ACCEPTED, Json(body)).into_response(),
        Err(refused) => refusal(refused),
    }
}
