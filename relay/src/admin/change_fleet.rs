//! `PUT` and `DELETE /v1/destinations/{name}` with `queue = redis`: the
//! change is the fleet's ([`crate::queue::shared_changes`]). It is written
//! to Redis before the answer (Redis not answering: 503, nothing changed),
//! applied here at once, and by every other relay within a second.
//!
//! - `PUT` answers as in the local mode (201 made, 200 changed, the same
//!   checks before); a name the fleet is still deleting answers 409 until
//!   its grace and five seconds more have passed (by Redis's clock) and its
//!   queue is empty.
//! - Each change is written only if the name still holds what this relay
//!   read from Redis just before (a compare-and-set): two relays changing
//!   one name at once get one 200 or 202 and one 409 `destination-changed`,
//!   never a change undone unseen.
//! - `DELETE` closes the destination on every relay; the fleet delivers
//!   what its queue holds within this relay's shutdown grace, then
//!   dead-letters the rest into the fleet's dead letters. `held` is the
//!   fleet's queue for it.

#![cfg(feature = "redis")]

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::MutexGuard;

use super::Admin;
use super::change_answers::{Deleting, closing, conflict, unknown_destination, unprocessable};
use crate::config::{Destination, Fields};
use crate::domain::problem::problem;
use crate::queue::shared_changes::{Change, Fleet, REMAKE_AFTER};

fn unreachable(e: String) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "fleet-unreachable",
        format!(
            "Redis did not answer: the change may or may not have been made; \
             read the destination and retry: {e}"
        ),
        Vec::new(),
    )
}

fn changed_meanwhile() -> Response {
    conflict(
        "destination-changed",
        "another relay changed it meanwhile; nothing changed here: read it and retry",
    )
}

/// A change's start: this relay's turn, then what the fleet holds for
/// `name` now, read from Redis (a relay may lag a poll), raw and parsed;
/// or the answer when shutdown has begun or Redis does not answer.
async fn begin<'a>(
    admin: &Admin,
    fleet: &'a Fleet,
    name: &str,
) -> Result<(MutexGuard<'a, ()>, Option<String>, Option<Change>), Response> {
    let turn = fleet.turn.lock().await;
    if admin.catalog.is_closing() {
        return Err(closing());
    }
    let (raw, current) = fleet.read(name).await.map_err(unreachable)?;
    Ok((turn, raw, current))
}

/// The most webhooks a destination's queue may hold (budget × rate).
const MAX_BOUND: f64 = 1_000_000.0;

/// `PUT` (the body checked, its address allowed): the fleet's change.
pub(super) async fn put(
    admin: &Admin,
    fleet: &Fleet,
    name: String,
    fields: Fields,
    dest: &Destination,
) -> Response {
    if let Err(e) = crate::queue::overrides(dest).validate(f64::INFINITY) {
        return unprocessable("bad-destination", e.to_string());
    }
    let s = &admin.defaults;
    let bound = dest.budget.unwrap_or(s.budget).as_secs_f64() * dest.rate.unwrap_or(s.rate);
    if bound > MAX_BOUND {
        let detail = format!(
            "budget × rate is {bound:.0} webhooks, above the {MAX_BOUND:.0} a queue may hold"
        );
        return unprocessable("bad-destination", detail);
    }
    let (_turn, raw, current) = match begin(admin, fleet, &name).await {
        Ok(begun) => begun,
        Err(refused) => return refused,
    };
    let existed = match &current {
        Some(Change::Put(_)) => true,
        Some(Change::Deleted { until_unix_ms }) => {
            let ends = until_unix_ms.saturating_add(REMAKE_AFTER.as_secs() * 1000);
            // Its queue in Redis, whether or not this relay knew it.
            fleet.shared().remember_deleted(&name);
            let left = match fleet.shared().lane(&name) {
                Some(lane) => lane.queue.depth().await.unwrap_or(1),
                None => 1,
            };
            if fleet.now().await < ends || left > 0 {
                let detail = format!(
                    "it is being deleted across the fleet; make it again once its grace and {}s more \
                     have passed and its last webhooks are dead-lettered",
                    REMAKE_AFTER.as_secs()
                );
                return conflict("destination-deleting", &detail);
            }
            false
        }
        None => admin.catalog.get(&name).is_some_and(|l| l.open),
    };
    if !existed && admin.catalog.held() >= admin.max_destinations {
        let detail = format!(
            "the relay holds its {} destinations (max_destinations)",
            admin.max_destinations
        );
        return unprocessable("too-many-destinations", detail);
    }
    match fleet
        .write(&name, &Change::Put(fields), raw.as_deref())
        .await
    {
        Ok(true) => {}
        Ok(false) => return changed_meanwhile(),
        Err(e) => return unreachable(e),
    }
    let Some(listed) = admin.catalog.get(&name).filter(|l| l.open) else {
        // Written, and refused here (another check than the ones above).
        let detail = "the fleet keeps it, and this relay does not apply it: see its log".into();
        return unprocessable("bad-destination", detail);
    };
    tracing::info!(destination = %name, created = !existed, "destination changed through the admin API, for the fleet");
    let view = admin.defaults.view(&listed, None);
    let status = match existed {
        false => StatusCode::CREATED,
        true => StatusCode::OK,
    };
    (status, Json(view)).into_response()
}

/// `DELETE`: the fleet's deletion.
pub(super) async fn delete(admin: &Admin, fleet: &Fleet, name: String) -> Response {
    let (_turn, raw, current) = match begin(admin, fleet, &name).await {
        Ok(begun) => begun,
        Err(refused) => return refused,
    };
    let open = match current {
        Some(Change::Put(_)) => true,
        Some(Change::Deleted { .. }) => false,
        // As configured here (a relay's own configuration decides).
        None => admin.catalog.is_open(&name),
    };
    if !open {
        return unknown_destination();
    }
    let held = match fleet.shared().lane(&name) {
        Some(lane) => lane.queue.depth().await.unwrap_or(0),
        None => 0,
    };
    let until = Fleet::deadline(fleet.now().await, admin.grace);
    let gone = Change::Deleted {
        until_unix_ms: until,
    };
    match fleet.write(&name, &gone, raw.as_deref()).await {
        Ok(true) => {}
        Ok(false) => return changed_meanwhile(),
        Err(e) => return unreachable(e),
    }
    tracing::info!(destination = %name, held, "destination deleted through the admin API, for the fleet");
    let body = Deleting {
        name,
        held,
        grace_ms: u64::try_from(admin.grace.as_millis()).unwrap_or(u64::MAX),
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}
