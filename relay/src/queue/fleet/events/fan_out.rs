//! An event's fan-out in the fleet: each copy queued into its endpoint's
//! queue under the event's id ([`queue_copy`]), [`AT_ONCE`] at a time,
//! then the event marked fanned out ([`Fan::fan_out`]); the events a relay
//! left unfinished (it died) made by any relay's [`sweep`].

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::super::FleetQueue;
use super::super::changes::{Change, Fleet};
use super::super::redis::events::Ended;
use super::super::redis::queue::{Admission, Again};
use super::super::shared::Shared;
use crate::catalog::Catalog;
use crate::domain::job::{EventOf, Job, unix_ms};
use crate::events::id::id_at;
use crate::events::record::EventRecord;
use crate::telemetry::EVENT_COPIES;

/// How long an event may wait for its fan-out before any relay makes it
/// (the relay that took it died first).
pub(crate) const FAN_OUT_LATE: Duration = Duration::from_secs(5);
/// How often each relay looks for such events.
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// Copies one fan-out queues at once.
const AT_ONCE: usize = 16;
/// Fan-outs one relay makes at once (a post beyond them waits).
pub(crate) const FAN_OUTS: usize = 16;
/// Applications (and events of one) one look of the sweep reads at once.
const PAGE: usize = 64;

/// A copy of `record` as its endpoints' queues hold it.
pub(super) fn copy_bytes(record: &EventRecord, payload: &[u8]) -> Vec<u8> {
    let mut job = Job::raw(axum::body::Bytes::copy_from_slice(payload));
    job.content_type = Some("application/json".to_owned());
    job.tenant = record.tenant.clone();
    job.received_unix_ms = record.created_ms;
    job.event_of = Some(Arc::new(EventOf {
        app: Arc::from(record.app.as_str()),
        kind: Arc::from(record.kind.as_str()),
    }));
    let mut out = Vec::with_capacity(payload.len() + 64);
    dripfeed::journal::JobCodec::encode(&job, &mut out);
    out
}

/// What queueing one copy did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Queued {
    /// Queued (or queued before: a fan-out made twice; or, sent again,
    /// already on its way).
    Yes,
    /// Its queue was full: a dead letter (`overflow`).
    Overflow,
    /// A copy with its id is still in its queue (a resend of one pending).
    Held,
    /// This relay has no open lane for the endpoint, or it is another
    /// application's now.
    Gone,
    /// Redis did not take it.
    Failed(String),
}

/// Queues `endpoint`'s copy of `app`'s event `id` (`bytes`), admitting
/// one with that id again as `again` says.
pub(super) async fn queue_copy(
    shared: &Shared,
    app: &str,
    id: u64,
    endpoint: &str,
    bytes: &[u8],
    owner: Option<&str>,
    again: Again,
) -> Queued {
    let Some(lane) = shared.lane(endpoint).filter(|l| l.open) else {
        return Queued::Gone;
    };
    let sid = id.to_string();
    let bound = lane.bound_now();
    let mut answer = lane
        .queue
        .admit_copy(&sid, bytes, bound, owner, (again, false))
        .await;
    if let Ok(Admission::Full { .. }) = answer {
        // Head-drop with every entry claimed: nothing to evict.
        answer = lane
            .queue
            .admit_copy(&sid, bytes, bound, owner, (again, true))
            .await;
    }
    let counts = &lane.counts;
    if let Ok(
        Admission::Added { .. }
        | Admission::Evicted { .. }
        | Admission::Unconfirmed { .. }
        | Admission::Seen { .. },
    ) = answer
    {
        shared.admitted(endpoint);
    }
    match answer {
        Ok(Admission::Added { .. } | Admission::Unconfirmed { .. }) => {
            counts.admitted();
            metrics::counter!(EVENT_COPIES, "outcome" => "queued").increment(1);
            Queued::Yes
        }
        Ok(Admission::Evicted { evicted, .. }) => {
            counts.admitted();
            counts.evicted();
            metrics::counter!(EVENT_COPIES, "outcome" => "queued").increment(1);
            // The copy evicted (if it was one) says why.
            if let Ok(other) = evicted.parse::<u64>() {
                let why = Ended::DeadLettered("evicted".into());
                if let Err(e) = shared.events.ended(app, other, endpoint, why).await {
                    tracing::debug!(error = %e, "the fleet's events: an evicted copy's end was not recorded");
                }
            }
            Queued::Yes
        }
        Ok(Admission::Deferred { .. }) => {
            counts.overflowed();
            metrics::counter!(EVENT_COPIES, "outcome" => "overflow").increment(1);
            let ended = Ended::DeadLettered("overflow".into());
            if let Err(e) = shared.events.ended(app, id, endpoint, ended).await {
                tracing::debug!(error = %e, "the fleet's events: an overflowed copy's end was not recorded");
            }
            Queued::Overflow
        }
        Ok(Admission::Seen { .. } | Admission::Repeat { .. }) => Queued::Yes,
        Ok(Admission::Taken) => Queued::Held,
        Ok(Admission::Full { .. }) => Queued::Failed("its queue is full".into()),
        Err(e) => Queued::Failed(e.to_string()),
    }
}

/// What a fan-out needs: the queues, the endpoints in force here, and the
/// fleet's changes (whether an endpoint this relay lacks was deleted).
#[derive(Clone)]
pub(crate) struct Fan {
    pub(crate) shared: Arc<Shared>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) changes: Arc<Fleet>,
}

impl Fan {
    /// Why `endpoint`'s copies of `app`'s events can no longer be queued:
    /// the reason its deletion gives, if the fleet deleted it (or it is
    /// another application's endpoint now); `None` while it may still be
    /// queued (another relay has it, or this one will).
    async fn gone(&self, app: &str, endpoint: &str) -> Option<String> {
        if let Some(l) = self.catalog.get(endpoint).filter(|l| l.open) {
            let own = l.dest.endpoint.is_some_and(|e| &*e.application == app);
            return (!own).then(|| "destination-deleted".to_owned());
        }
        match self.changes.read(endpoint).await {
            Ok((_, Some(Change::Deleted { reason, .. }))) => {
                Some(reason.unwrap_or_else(|| "destination-deleted".to_owned()))
            }
            _ => None,
        }
    }

    /// Queues every copy of event `id` (`record`, `payload`), [`AT_ONCE`]
    /// at a time, then marks it fanned out. Whether every copy found its
    /// place (else the sweep tries again).
    pub(crate) async fn fan_out(&self, id: u64, record: Arc<EventRecord>, payload: &[u8]) -> bool {
        let bytes: Arc<[u8]> = Arc::from(copy_bytes(&record, payload));
        let mut whole = true;
        for chunk in record.copies.chunks(AT_ONCE) {
            let mut set = tokio::task::JoinSet::new();
            for endpoint in chunk {
                let (fan, record, bytes) = (self.clone(), record.clone(), bytes.clone());
                let endpoint = endpoint.clone();
                set.spawn(async move {
                    let (app, owner) = (&record.app, record.tenant.as_deref());
                    // Another application's endpoint of that name now: not
                    // this event's to reach.
                    let queued = match fan.catalog.get(&endpoint).and_then(|l| l.dest.endpoint) {
                        Some(e) if &*e.application != app => Queued::Gone,
                        _ => {
                            queue_copy(&fan.shared, app, id, &endpoint, &bytes, owner, Again::Never)
                                .await
                        }
                    };
                    (endpoint, queued)
                });
            }
            while let Some(done) = set.join_next().await {
                let Ok((endpoint, queued)) = done else {
                    whole = false;
                    continue;
                };
                match queued {
                    Queued::Yes | Queued::Overflow | Queued::Held => {}
                    Queued::Gone => {
                        whole &= self.deleted(&record, id, &endpoint, &bytes).await;
                    }
                    Queued::Failed(e) => {
                        tracing::warn!(error = %e, event = id, endpoint = %endpoint, "the fleet's events: a copy was not queued; the sweep tries again");
                        whole = false;
                    }
                }
            }
        }
        if whole && let Err(e) = self.shared.events.fanned_out(&record.app, id).await {
            tracing::debug!(error = %e, "the fleet's events: a fan-out's end was not recorded; the sweep ends it");
        }
        whole
    }

    /// A copy this relay found no open lane for: recorded dead-lettered
    /// with its deletion's reason if the fleet deleted its endpoint, and
    /// written in its dead letters (true); else left for the sweep
    /// (false).
    async fn deleted(&self, record: &EventRecord, id: u64, endpoint: &str, bytes: &[u8]) -> bool {
        let app = &record.app;
        let Some(reason) = self.gone(app, endpoint).await else {
            return false;
        };
        metrics::counter!(EVENT_COPIES, "outcome" => "deleted").increment(1);
        let ended = Ended::DeadLettered(reason.clone());
        match self.shared.events.ended(app, id, endpoint, ended).await {
            Ok(()) => {
                // Listed with the deleted endpoint's other dead letters (it
                // was only marked so in its event); once, however many
                // times the event is fanned out. Not in another
                // application's endpoint of the name.
                if let Some(lane) = self.shared.lane(endpoint).filter(|l| !l.open)
                    && let Err(e) = lane
                        .queue
                        .dead_letter_unsent(
                            &id.to_string(),
                            bytes,
                            &reason,
                            record.tenant.as_deref(),
                        )
                        .await
                {
                    tracing::warn!(error = %e, event = id, endpoint = %endpoint, "the fleet's events: a copy of a deleted endpoint is marked in its event, not in the dead letters");
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the fleet's events: a copy of a deleted endpoint was not recorded");
                false
            }
        }
    }

    /// Fans out `app`'s events taken before `before` (an id) and not yet
    /// fanned out, oldest first, a page at a time (one that keeps failing
    /// holds up none after it).
    async fn fan_out_late(&self, app: &str, before: u64) {
        let events = &self.shared.events;
        let mut after = None;
        loop {
            let ids = match events.unqueued(app, after, before, PAGE).await {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::debug!(error = %e, "the fleet's events: late fan-outs not read");
                    return;
                }
            };
            for &id in &ids {
                let (Ok(Some(record)), Ok(payload)) =
                    (events.record(app, id).await, events.payload(app, id).await)
                else {
                    continue;
                };
                let payload = payload.unwrap_or_default();
                if self.fan_out(id, Arc::new(record), &payload).await {
                    tracing::info!(app = %app, event = id, "an event's fan-out left unfinished was made");
                }
            }
            match ids.last() {
                Some(&last) if ids.len() == PAGE => after = Some(last),
                _ => return,
            }
        }
    }
}

/// The most applications one pass of the sweep looks at (the rest, the
/// next pass).
const SWEEP_APPS: usize = 1_000;

/// Until the relay stops: every [`SWEEP_EVERY`], the applications that
/// posted more than [`FAN_OUT_LATE`] ago and may have events not yet
/// fanned out are looked at, and those events fanned out here; an
/// application with none left is forgotten until it posts again.
pub(crate) async fn sweep(queue: Weak<FleetQueue>) {
    // Whether the last pass could not read the applications (logged once
    // an episode: the sweep is what completes a fan-out a relay left).
    let mut failing = false;
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(q) = queue.upgrade() else { return };
        if q.catalog.is_closing() {
            return;
        }
        let fan = q.fan();
        let events = &fan.shared.events;
        let late_ms = unix_ms().saturating_sub(FAN_OUT_LATE.as_millis() as u64);
        let apps = match events.posted_before(late_ms, SWEEP_APPS).await {
            Ok(apps) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(
                        "the fleet's events: the sweep reads the applications posting again"
                    );
                }
                apps
            }
            Err(e) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(error = %e, "the fleet's events: the sweep cannot read the applications posting: a fan-out a relay left unfinished waits until it can");
                }
                continue;
            }
        };
        for (app, noted) in apps {
            fan.fan_out_late(&app, id_at(late_ms)).await;
            if let Ok(false) = events.any_unqueued(&app).await
                && let Err(e) = events.settled(&app, &noted).await
            {
                tracing::debug!(error = %e, "the fleet's events: an application's sweep not ended");
            }
        }
    }
}
