//! `PUT` and `DELETE` of a destination in the fleet's engine: the change
//! is the fleet's ([`super::changes`]). It is written
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

use tokio::sync::MutexGuard;

use super::FleetQueue;
use super::changes::{Change, Fleet, REMAKE_AFTER};
use crate::config::{Destination, Fields};
use crate::domain::schemas::Deleting;
use crate::queue::contract::{ChangeRefused, Put};

fn unreachable(e: String) -> ChangeRefused {
    ChangeRefused::new(
        503,
        "fleet-unreachable",
        format!(
            "Redis did not answer: the change may or may not have been made; \
             read the destination and retry: {e}"
        ),
    )
}

fn changed_meanwhile() -> ChangeRefused {
    ChangeRefused::new(
        409,
        "destination-changed",
        "another relay changed it meanwhile; nothing changed here: read it and retry",
    )
}

/// A change's start: this relay's turn, then what the fleet holds for
/// `name` now, read from Redis (a relay may lag a poll), raw and parsed;
/// or the answer when shutdown has begun or Redis does not answer.
async fn begin<'a>(
    q: &FleetQueue,
    fleet: &'a Fleet,
    name: &str,
) -> Result<(MutexGuard<'a, ()>, Option<String>, Option<Change>), ChangeRefused> {
    let turn = fleet.turn.lock().await;
    if q.catalog.is_closing() {
        return Err(ChangeRefused::closing());
    }
    let (raw, current) = fleet.read(name).await.map_err(unreachable)?;
    Ok((turn, raw, current))
}

/// `PUT` (the body checked, its address allowed and its limits held): the
/// fleet's change.
pub async fn put(
    q: &FleetQueue,
    name: &str,
    fields: Fields,
    _dest: &Destination,
) -> Result<Put, ChangeRefused> {
    let fleet = &q.changes;
    let (_turn, raw, current) = begin(q, fleet, name).await?;
    let existed = match &current {
        Some(Change::Put(_)) => true,
        Some(Change::Deleted { until_unix_ms }) => {
            let ends = until_unix_ms.saturating_add(REMAKE_AFTER.as_secs() * 1000);
            // Its queue in Redis, whether or not this relay knew it.
            fleet.shared().remember_deleted(name);
            let left = match fleet.shared().lane(name) {
                Some(lane) => lane.queue.depth().await.unwrap_or(1),
                None => 1,
            };
            if fleet.now().await < ends || left > 0 {
                let detail = format!(
                    "it is being deleted across the fleet; make it again once its grace and {}s more \
                     have passed and its last webhooks are dead-lettered",
                    REMAKE_AFTER.as_secs()
                );
                return Err(ChangeRefused::new(409, "destination-deleting", detail));
            }
            false
        }
        None => q.catalog.get(name).is_some_and(|l| l.open),
    };
    if !existed && q.catalog.held() >= q.max_destinations {
        let detail = format!(
            "the relay holds its {} destinations (max_destinations)",
            q.max_destinations
        );
        return Err(ChangeRefused::new(422, "too-many-destinations", detail));
    }
    match fleet
        .write(name, &Change::Put(fields), raw.as_deref())
        .await
    {
        Ok(true) => {}
        Ok(false) => return Err(changed_meanwhile()),
        Err(e) => return Err(unreachable(e)),
    }
    if q.catalog.get(name).filter(|l| l.open).is_none() {
        // Written, and refused here (another check than the ones above).
        let detail = "the fleet keeps it, and this relay does not apply it: see its log";
        return Err(ChangeRefused::new(422, "bad-destination", detail));
    }
    tracing::info!(destination = %name, created = !existed, "destination changed through the admin API, for the fleet");
    Ok(match existed {
        false => Put::Made,
        true => Put::Changed,
    })
}

/// `DELETE`: the fleet's deletion.
pub async fn delete(q: &FleetQueue, name: &str) -> Result<Deleting, ChangeRefused> {
    let fleet = &q.changes;
    let (_turn, raw, current) = begin(q, fleet, name).await?;
    let open = match current {
        Some(Change::Put(_)) => true,
        Some(Change::Deleted { .. }) => false,
        // As configured here (a relay's own configuration decides).
        None => q.catalog.is_open(name),
    };
    if !open {
        return Err(ChangeRefused::unknown());
    }
    let held = match fleet.shared().lane(name) {
        Some(lane) => lane.queue.depth().await.unwrap_or(0),
        None => 0,
    };
    let until = Fleet::deadline(fleet.now().await, q.grace);
    let gone = Change::Deleted {
        until_unix_ms: until,
    };
    match fleet.write(name, &gone, raw.as_deref()).await {
        Ok(true) => {}
        Ok(false) => return Err(changed_meanwhile()),
        Err(e) => return Err(unreachable(e)),
    }
    tracing::info!(destination = %name, held, "destination deleted through the admin API, for the fleet");
    Ok(Deleting {
        name: name.to_owned(),
        held,
        grace_ms: u64::try_from(q.grace.as_millis()).unwrap_or(u64::MAX),
    })
}
