//! `PUT` and `DELETE /v1/destinations/{name}` with `queue = redis`: the
//! change is the fleet's ([`crate::queue::shared_changes`]). It is written
//! to Redis before the answer (Redis not answering: 503, nothing changed),
//! applied here at once, and by every other relay within a second.
//!
//! - `PUT` answers as in the local mode (201 made, 200 changed, the same
//!   checks before); a name the fleet is still deleting answers 409 until
//!   its grace and five seconds more have passed.
//! - `DELETE` closes the destination on every relay; the fleet delivers
//!   what its queue holds within this relay's shutdown grace, then
//!   dead-letters the rest into the fleet's dead letters. `held` is the
//!   fleet's queue for it.

#![cfg(feature = "redis")]

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::Admin;
use super::change::{Deleting, closing, conflict, unprocessable};
use crate::config::Fields;
use crate::intake::problem::problem;
use crate::queue::shared_changes::{Change, Fleet, REMAKE_AFTER};

fn unreachable(e: String) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "fleet-unreachable",
        format!("Redis did not take the change, nothing changed: {e}"),
        Vec::new(),
    )
}

/// `PUT` (the body checked, its address allowed): the fleet's change.
pub(super) async fn put(admin: &Admin, fleet: &Fleet, name: String, fields: Fields) -> Response {
    let _turn = fleet.turn.lock().await;
    if admin.catalog.is_closing() {
        return closing();
    }
    let before = admin.catalog.get(&name);
    if fleet.still_deleting(&name) || before.as_ref().is_some_and(|l| !l.open) {
        let detail = format!(
            "it is being deleted across the fleet; make it again once its grace and {}s more have passed",
            REMAKE_AFTER.as_secs()
        );
        return conflict("destination-deleting", &detail);
    }
    if before.is_none() && admin.catalog.held() >= admin.max_destinations {
        let detail = format!(
            "the relay holds its {} destinations (max_destinations)",
            admin.max_destinations
        );
        return unprocessable("too-many-destinations", detail);
    }
    if let Err(e) = fleet.write(&name, &Change::Put(fields)).await {
        return unreachable(e);
    }
    let Some(listed) = admin.catalog.get(&name).filter(|l| l.open) else {
        // Written, and refused here (another check than the one above).
        let detail = "the fleet keeps it, and this relay does not apply it: see its log".into();
        return unprocessable("bad-destination", detail);
    };
    tracing::info!(destination = %name, created = before.is_none(), "destination changed through the admin API, for the fleet");
    let view = admin.defaults.view(&listed, None);
    let status = match before {
        None => StatusCode::CREATED,
        Some(_) => StatusCode::OK,
    };
    (status, Json(view)).into_response()
}

/// `DELETE`: the fleet's deletion.
pub(super) async fn delete(admin: &Admin, fleet: &Fleet, name: String) -> Response {
    let _turn = fleet.turn.lock().await;
    if admin.catalog.is_closing() {
        return closing();
    }
    if !admin.catalog.is_open(&name) {
        let detail = "no destination of that name is configured".to_owned();
        return problem(
            StatusCode::NOT_FOUND,
            "unknown-destination",
            detail,
            Vec::new(),
        );
    }
    let held = match fleet.shared().lane(&name) {
        Some(lane) => lane.queue.depth().await.unwrap_or(0),
        None => 0,
    };
    let until = Fleet::deadline(admin.grace);
    if let Err(e) = fleet
        .write(
            &name,
            &Change::Deleted {
                until_unix_ms: until,
            },
        )
        .await
    {
        return unreachable(e);
    }
    tracing::info!(destination = %name, held, "destination deleted through the admin API, for the fleet");
    let body = Deleting {
        name,
        held,
        grace_ms: u64::try_from(admin.grace.as_millis()).unwrap_or(u64::MAX),
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}
