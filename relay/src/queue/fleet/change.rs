//! `PUT`, `PATCH` and `DELETE` of a destination in the fleet's engine: the
//! change is the fleet's ([`super::changes`]). It is written to Redis
//! before the answer (Redis not answering: 503, nothing changed), applied
//! here at once, and by every other relay within a second.
//!
//! - Each change is resolved against what Redis holds for the name, read
//!   just before, and written only if the name still holds exactly that
//!   (a compare-and-set on the value the change was merged into). When
//!   another relay's change came between, the change is resolved again
//!   against the newer value, a few times: two relays patching one
//!   destination at once both apply, in some order, and neither undoes
//!   the other. `If-Match` is checked against the value the write
//!   compares with, so a tag read before another relay's change is a 412.
//! - `PUT` answers as in the local mode (201 made, 200 changed, the same
//!   checks before); a name the fleet is still deleting answers 409 until
//!   its grace and five seconds more have passed (by Redis's clock) and its
//!   queue is empty. A `PATCH` of a name being deleted, or deleted, is 404.
//! - `DELETE` closes the destination on every relay; the fleet delivers
//!   what its queue holds within this relay's shutdown grace, then
//!   dead-letters the rest into the fleet's dead letters. `held` is the
//!   fleet's queue for it.

use tokio::sync::MutexGuard;

use super::FleetQueue;
use super::changes::{Change, Fleet, REMAKE_AFTER, app_entry, checked};
use crate::catalog::edit::{Edit, Precondition, app_etag, etag, resolve};
use crate::catalog::vet::Vetter;
use crate::config::Fields;
use crate::domain::schemas::Deleting;
use crate::queue::contract::{ChangeRefused, Changed, Put};

/// How many times a change is resolved again when another relay's change
/// came between its read and its write.
const ATTEMPTS: usize = 8;

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

/// 409: an application made again while this relay was deleting it.
fn app_changed() -> ChangeRefused {
    ChangeRefused::new(
        409,
        "application-changed",
        "the application was made again while this deletion went on (another relay ended it): \
         its deletion stops here, the endpoints made since kept",
    )
}

fn changed_meanwhile() -> ChangeRefused {
    ChangeRefused::new(
        409,
        "destination-changed",
        "other relays changed it again and again meanwhile; nothing changed here: read it and retry",
    )
}

/// What the fleet holds for a name, as a change sees it.
// Fields is large, and these are few and short-lived (one per change):
// boxing it would cost every reader an indirection for nothing.
#[allow(clippy::large_enum_variant)]
enum Now {
    /// Its fields as kept: in the map, or (`raw` `None`) as this relay is
    /// configured.
    Here(Fields),
    /// Not there (never made, or its deletion ended).
    Absent,
    /// Being deleted (until its grace and [`REMAKE_AFTER`] have passed and
    /// its queue is empty).
    Deleting,
}

/// This relay's turn (one change at a time here; the compare-and-set
/// orders them across the fleet), or 503 once shutdown has begun.
async fn turn<'a>(q: &FleetQueue, fleet: &'a Fleet) -> Result<MutexGuard<'a, ()>, ChangeRefused> {
    let turn = fleet.turn.lock().await;
    if q.catalog.is_closing() {
        return Err(ChangeRefused::closing());
    }
    // What the fleet changed since the last poll, applied here first: a
    // change starts from what the fleet holds, not from a view up to a
    // poll old (an application another relay deleted a moment ago, made
    // again here, kept the deleted one's endpoints for its first events).
    fleet.catch_up().await;
    Ok(turn)
}

/// What the fleet holds for `name` now, read from Redis (a relay may lag
/// a poll), raw (what a compare-and-set expects) and as a change sees it.
async fn read(q: &FleetQueue, name: &str) -> Result<(Option<String>, Now), ChangeRefused> {
    let fleet = &q.changes;
    let (raw, change) = fleet.read(name).await.map_err(unreachable)?;
    let now = match change {
        // As kept, normalized as a destination (so every relay's tag agrees).
        Some(Change::Put(fields)) => match checked(&fields) {
            Ok(d) => Now::Here(d.fields()),
            Err(_) => Now::Here(fields),
        },
        Some(Change::Deleted { until_unix_ms, .. }) => {
            let remake_at = until_unix_ms.saturating_add(REMAKE_AFTER.as_secs() * 1000);
            // Its queue in Redis, whether or not this relay knew it.
            fleet.shared().remember_deleted(name);
            let left = match fleet.shared().lane(name) {
                Some(lane) => lane.queue.depth().await.unwrap_or(1),
                None => 1,
            };
            match fleet.now().await < remake_at || left > 0 {
                true => Now::Deleting,
                false => Now::Absent,
            }
        }
        // Not a destination's (an application's name in the map).
        Some(Change::App(_) | Change::AppDeleted | Change::AppDeleting) => Now::Absent,
        // As configured here (a relay's own configuration decides); an
        // entry that does not read is replaced by the change.
        None => match q.catalog.get(name).filter(|l| l.open) {
            Some(l) => Now::Here(l.dest.fields()),
            None => Now::Absent,
        },
    };
    Ok((raw, now))
}

/// `name`'s fields as the fleet keeps them now.
pub(crate) async fn current(q: &FleetQueue, name: &str) -> Result<Option<Fields>, ChangeRefused> {
    Ok(match read(q, name).await?.1 {
        Now::Here(fields) => Some(fields),
        Now::Absent | Now::Deleting => None,
    })
}

/// `PUT` or `PATCH`: the fleet's change, resolved against the value its
/// compare-and-set checks.
pub(crate) async fn change(
    q: &FleetQueue,
    name: &str,
    edit: Edit,
    pre: &Precondition,
    vet: &Vetter,
) -> Result<Changed, ChangeRefused> {
    let fleet = &q.changes;
    let _turn = turn(q, fleet).await?;
    for _ in 0..ATTEMPTS {
        if q.catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let (raw, now) = read(q, name).await?;
        let current = match now {
            Now::Here(fields) => Some(fields),
            Now::Absent => None,
            Now::Deleting if matches!(edit, Edit::Merge(_)) => {
                return Err(match pre.holds(None) {
                    true => ChangeRefused::unknown(),
                    false => ChangeRefused::precondition(),
                });
            }
            // If-Match names a tag this destination no longer has (412),
            // as the local engine answers.
            Now::Deleting if !pre.holds(None) => return Err(ChangeRefused::precondition()),
            Now::Deleting => {
                let detail = format!(
                    "it is being deleted across the fleet; make it again once its grace and {}s more \
                     have passed and its last webhooks are dead-lettered",
                    REMAKE_AFTER.as_secs()
                );
                return Err(ChangeRefused::new(409, "destination-deleting", detail));
            }
        };
        let existed = current.is_some();
        let fields = resolve(name, current.as_ref(), edit.clone(), pre)?;
        if let Some(now) = &current
            && now.application != fields.application
        {
            return Err(ChangeRefused::application_fixed());
        }
        // Its application first (404 before any other check, as the local
        // engine answers).
        let app = match &fields.application {
            Some(app) => Some(live_app(q, app).await?),
            None => None,
        };
        if !existed && q.catalog.held() >= q.max_destinations {
            let detail = format!(
                "the relay holds its {} destinations (max_destinations)",
                q.max_destinations
            );
            return Err(ChangeRefused::new(422, "too-many-destinations", detail));
        }
        let dest = vet.vet(fields.clone(), &q.limits).await?;
        // Made (not a configured one, open here, whose counts are its
        // own): its counts start from nothing, not from a deleted one's of
        // the name; before the write where this relay has the deleted
        // one's lane, so no webhook taken once it is made is uncounted.
        let before = q.shared.lane(name);
        let made = !existed && !before.as_ref().is_some_and(|l| l.open);
        if made && let Some(lane) = &before {
            reset_counts(name, lane).await;
        }
        // Written only while its application's entry is as read: not once
        // the application's deletion has begun.
        let guard = app.as_ref().map(|(e, r)| (e.as_str(), r.as_deref()));
        match fleet
            .write_both(name, &Change::Put(fields), raw.as_deref(), guard)
            .await
        {
            Ok(true) => {}
            // Another relay's change came between: resolve against it.
            Ok(false) => continue,
            Err(e) => return Err(unreachable(e)),
        }
        if q.catalog.get(name).filter(|l| l.open).is_none() {
            // Written, and refused here (another check than the ones above).
            let detail = "the fleet keeps it, and this relay does not apply it: see its log";
            return Err(ChangeRefused::new(422, "bad-destination", detail));
        }
        if made
            && before.is_none()
            && let Some(lane) = q.shared.lane(name)
        {
            reset_counts(name, &lane).await;
        }
        tracing::info!(destination = %name, created = !existed, "destination changed through the admin API, for the fleet");
        return Ok(Changed {
            put: match existed {
                false => Put::Made,
                true => Put::Changed,
            },
            etag: etag(&dest.fields()),
        });
    }
    Err(changed_meanwhile())
}

/// Starts `lane`'s counts again (a destination made again under `name`).
async fn reset_counts(name: &str, lane: &super::lane::Lane) {
    if let Err(e) = lane.queue.reset_counts().await {
        tracing::warn!(destination = %name, error = %e, "a destination made again keeps the counts of the one deleted before it");
    }
}

/// `DELETE`: the fleet's deletion.
pub(crate) async fn delete(
    q: &FleetQueue,
    name: &str,
    pre: &Precondition,
) -> Result<Deleting, ChangeRefused> {
    delete_for(q, name, pre, None).await
}

/// The fleet's deletion of `name`; with `app`, as an endpoint of
/// application `app` being deleted (its rest dead-lettered as
/// `application-deleted`, else `destination-deleted`): only if it is one
/// of `app`'s (else 404) and only while `app` is marked as being deleted
/// (checked in the write: one made again meanwhile keeps its endpoints).
pub(crate) async fn delete_for(
    q: &FleetQueue,
    name: &str,
    pre: &Precondition,
    app: Option<&str>,
) -> Result<Deleting, ChangeRefused> {
    let fleet = &q.changes;
    let _turn = turn(q, fleet).await?;
    let reason = app.map(|_| "application-deleted");
    let (mark, marked) = (Change::AppDeleting.text(), app.map(app_entry));
    let guard = marked.as_deref().map(|entry| (entry, Some(mark.as_str())));
    for _ in 0..ATTEMPTS {
        let (raw, now) = read(q, name).await?;
        let Now::Here(current) = now else {
            return Err(ChangeRefused::unknown());
        };
        if app.is_some() && current.application.as_deref() != app {
            return Err(ChangeRefused::unknown()); // made again elsewhere
        }
        if !pre.holds(Some(&etag(&current))) {
            return Err(ChangeRefused::precondition());
        }
        let held = match fleet.shared().lane(name) {
            Some(lane) => lane.queue.depth().await.unwrap_or(0),
            None => 0,
        };
        let until = Fleet::deadline(fleet.now().await, q.grace);
        let gone = Change::Deleted {
            until_unix_ms: until,
            reason: reason.map(str::to_owned),
        };
        match fleet.write_both(name, &gone, raw.as_deref(), guard).await {
            Ok(true) => {}
            Ok(false) => {
                if let Some(entry) = &marked {
                    let (_, now) = fleet.read(entry).await.map_err(unreachable)?;
                    if !matches!(now, Some(Change::AppDeleting)) {
                        return Err(app_changed());
                    }
                }
                continue;
            }
            Err(e) => return Err(unreachable(e)),
        }
        tracing::info!(destination = %name, held, "destination deleted through the admin API, for the fleet");
        return Ok(Deleting {
            name: name.to_owned(),
            held,
            grace_ms: u64::try_from(q.grace.as_millis()).unwrap_or(u64::MAX),
        });
    }
    Err(changed_meanwhile())
}

/// `PUT` of application `name`: the fleet's, kept in the map beside the
/// destinations (as `app:NAME`). Whether it is new.
pub(crate) async fn put_app(
    q: &FleetQueue,
    name: &str,
    app: crate::catalog::App,
    pre: &Precondition,
) -> Result<(bool, crate::catalog::App), ChangeRefused> {
    let (made, kept) = write_app(q, name, &Change::App(app), pre).await?;
    Ok((made, kept.unwrap_or_default()))
}

/// Application `app`'s entry in the map and what it holds (raw), when
/// the application is there to take an endpoint (made, or configured
/// here and never changed); else 404.
async fn live_app(q: &FleetQueue, app: &str) -> Result<(String, Option<String>), ChangeRefused> {
    let entry = app_entry(app);
    let (raw, held) = q.changes.read(&entry).await.map_err(unreachable)?;
    let live = match held {
        Some(Change::App(_)) => true,
        None if raw.is_none() => q.catalog.app(app).is_some(),
        _ => false,
    };
    match live {
        true => Ok((entry, raw)),
        false => Err(ChangeRefused::unknown_application()),
    }
}

/// `DELETE` of application `name`, for the fleet: marked as being deleted
/// first (no relay makes an endpoint of it from then on: each endpoint's
/// write checks its application's entry), then each endpoint the fleet
/// holds for it deleted (its rest dead-lettered as
/// `application-deleted`), then forgotten. A deletion cut short (this
/// relay died) is ended by the next `DELETE`. How many endpoints it
/// deleted.
pub(crate) async fn delete_app(
    q: &FleetQueue,
    name: &str,
    pre: &Precondition,
) -> Result<usize, ChangeRefused> {
    write_app(q, name, &Change::AppDeleting, pre).await?;
    // Every endpoint written before the mark: those the map holds (one
    // this relay refused to apply too), read whole, and those configured
    // here; or 503: the mark stays, and a DELETE again goes on.
    let endpoints: std::collections::BTreeSet<String> = {
        let _turn = turn(q, &q.changes).await?;
        let in_map = q
            .changes
            .endpoints_in_map(name)
            .await
            .map_err(unreachable)?;
        let here = q
            .catalog
            .endpoints_of(name)
            .into_iter()
            .map(|e| e.to_string());
        here.chain(in_map).collect()
    };
    let mut deleted = 0;
    for endpoint in endpoints {
        let pre = Precondition::default();
        match delete_for(q, &endpoint, &pre, Some(name)).await {
            Ok(_) => deleted += 1,
            Err(e) if e.status == 404 => {}
            Err(e) => return Err(e),
        }
    }
    // Forgotten only while still marked (another relay may have ended
    // the deletion, and the application been made again since).
    write_app(q, name, &Change::AppDeleted, &Precondition::default()).await?;
    Ok(deleted)
}

/// Writes application `name`'s `change` if `pre` holds for it as the
/// fleet holds it (compare-and-set, resolved again when another relay's
/// change came between): whether it did not exist, and the application
/// written (a `PUT`'s).
async fn write_app(
    q: &FleetQueue,
    name: &str,
    change: &Change,
    pre: &Precondition,
) -> Result<(bool, Option<crate::catalog::App>), ChangeRefused> {
    let fleet = &q.changes;
    let _turn = turn(q, fleet).await?;
    let entry = app_entry(name);
    for _ in 0..ATTEMPTS {
        let (raw, read) = fleet.read(&entry).await.map_err(unreachable)?;
        let deleting = matches!(read, Some(Change::AppDeleting));
        let was = match read {
            Some(Change::App(a)) => Some(a),
            Some(Change::AppDeleted | Change::AppDeleting) => None,
            _ => q.catalog.app(name),
        };
        if !pre.holds(was.as_ref().map(app_etag).as_deref()) {
            return Err(ChangeRefused::precondition());
        }
        match change {
            Change::App(_) if deleting => {
                return Err(ChangeRefused::new(
                    409,
                    "application-deleting",
                    "it is being deleted (a deletion cut short ends with a DELETE of it again): \
                     make it again once it is gone",
                ));
            }
            // Nothing to delete (a deletion cut short goes on).
            Change::AppDeleting if was.is_none() && !deleting => {
                return Err(ChangeRefused::unknown_application());
            }
            // Its deletion ended by another relay meanwhile: nothing to do.
            Change::AppDeleted if !deleting => return Ok((false, None)),
            _ => {}
        }
        let made = was.is_none();
        let (change, kept) = match change {
            Change::App(app) => {
                let app = app.clone().made_over(was.as_ref());
                (&Change::App(app.clone()), Some(app))
            }
            other => (other, None),
        };
        match fleet.write(&entry, change, raw.as_deref()).await {
            Ok(true) => return Ok((made, kept)),
            Ok(false) => continue,
            Err(e) => return Err(unreachable(e)),
        }
    }
    Err(changed_meanwhile())
}
