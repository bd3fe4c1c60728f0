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
//! Both are written to the state file ([`crate::catalog::state`]) before
//! the answer, so a restart keeps them; one change runs at a time (a `PUT`
//! is written first and taken back if the set then refuses it). Without a
//! state file (`no_journal` without `state_dir`) both answer 409; once
//! shutdown has begun, 503. With `queue = redis` they are the fleet's,
//! written to Redis instead and applied by every relay within a second
//! ([`super::change_fleet`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dripfeed::destinations::DestinationError;
use serde::Deserialize;
use utoipa::ToSchema;

use super::Admin;
use super::change_answers::{Deleting, closing, conflict, unknown_destination, unprocessable};
use crate::config::{Fields, Origin, valid_name};
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;
use crate::queue;

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
    /// A Standard Webhooks signing secret, `whsec_` + base64.
    secret: Option<String>,
    /// The secret being replaced (needs `secret`): each delivery is signed
    /// with both.
    previous_secret: Option<String>,
}

const NO_STATE: &str = "this relay has no state file (no_journal without state_dir): \
                        a change would not survive a restart; give state_dir";

fn unwritable(e: std::io::Error) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "state-unwritable",
        format!("the state file cannot be written, nothing changed: {e}"),
        Vec::new(),
    )
}

/// The library's refusal of a destination's settings, as a problem.
fn refused(e: DestinationError) -> Response {
    match e {
        DestinationError::Unnamed => conflict(
            "destination-busy",
            "webhooks from before (of a destination of that name no longer configured) \
             are still being dead-lettered; retry shortly",
        ),
        DestinationError::Closed => closing(),
        e => unprocessable("bad-destination", e.to_string()),
    }
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
        return closing();
    }
    let origin = Origin::Api(admin.state_path.clone());
    let dest = match fields.clone().check_body(&origin) {
        Ok(dest) => dest,
        Err(detail) => return unprocessable("bad-destination", detail),
    };
    // Before the lock: a name's lookup may take seconds.
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
    #[cfg(feature = "redis")]
    if let Some(fleet) = &admin.fleet {
        return super::change_fleet::put(&admin, fleet, name, fields, &dest).await;
    }
    let mut state = admin.state.lock().await;
    let Some(file) = state.as_mut() else {
        return conflict("no-state-file", NO_STATE);
    };
    let before = admin.catalog.get(&name);
    match &before {
        Some(l) if !l.open => {
            let detail = "it is being deleted; make it again once it has drained";
            return conflict("destination-deleting", detail);
        }
        None if admin.catalog.held() >= admin.max_destinations => {
            let detail = format!(
                "the relay holds its {} destinations (max_destinations)",
                admin.max_destinations
            );
            return unprocessable("too-many-destinations", detail);
        }
        _ => {}
    }
    // The file first: if it cannot be written, nothing has changed; if the
    // set then refuses the change, the file is put back.
    let undo = file.undo_point();
    if let Err(e) = file.put(&name, &fields) {
        return unwritable(e);
    }
    let set = &admin.intake.set;
    if let Err(e) = set.define(&name, queue::overrides(&dest)) {
        if let Err(undo_error) = file.restore(undo) {
            tracing::error!(destination = %name, error = %undo_error, "the state file keeps a change the relay refused: it applies at the next start");
        }
        return refused(e);
    }
    tracing::info!(destination = %name, created = before.is_none(), "destination changed through the admin API");
    let listed = crate::catalog::Listed {
        dest: dest.clone(),
        open: true,
    };
    admin.catalog.put(dest);
    drop(state);
    let view = admin.defaults.view(&listed, set.stats(&name).as_ref());
    let status = match before {
        None => StatusCode::CREATED,
        Some(_) => StatusCode::OK,
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
    if admin.catalog.is_closing() {
        return closing();
    }
    #[cfg(feature = "redis")]
    if let Some(fleet) = &admin.fleet {
        return super::change_fleet::delete(&admin, fleet, name).await;
    }
    let mut state = admin.state.lock().await;
    let Some(file) = state.as_mut() else {
        return conflict("no-state-file", NO_STATE);
    };
    if admin.catalog.is_closing() {
        return closing(); // shutdown began while this waited for the lock
    }
    if !admin.catalog.is_open(&name) {
        return unknown_destination();
    }
    if let Err(e) = file.delete(&name) {
        return unwritable(e);
    }
    // From here intake gives no pass for it: new webhooks get 404.
    admin.catalog.close(&name);
    drop(state);
    let set = admin.intake.set.clone();
    let held = set.stats(&name).map_or(0, |s| s.held());
    let grace = admin.grace;
    let (catalog, sink, gone) = (admin.catalog.clone(), admin.sink.clone(), name.clone());
    let task = tokio::spawn(async move {
        // Admissions that picked it before it closed end first (each
        // admitted or refused), so none lands in a destination taken out.
        catalog.admissions_done(&gone).await;
        // The throttle delivers within the grace, then dead-letters the
        // rest itself; anything handed back goes to the file too.
        if let Some((_, returned)) = set.remove(&gone, grace).await {
            for job in returned {
                if sink.offer(job, "destination-deleted").is_err() {
                    tracing::error!(destination = %gone, "the dead-letter writer is gone: a webhook of a deleted destination was dropped");
                }
            }
        }
        catalog.forget(&gone);
        tracing::info!(destination = %gone, "deleted destination drained");
    });
    admin.catalog.removing(task);
    tracing::info!(destination = %name, held, "destination deleted through the admin API");
    let body = Deleting {
        name,
        held,
        grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}
