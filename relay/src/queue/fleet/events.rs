//! The fleet's events (`queue = redis`): an event is taken in one Redis
//! script, durable with the list of endpoints its copies go to before its
//! 202 ([`RedisEvents::post`]), then fanned out: each copy queued into its
//! endpoint's queue under the event's id, in a task of the relay that took
//! it. A relay that dies before it has queued every copy leaves the event
//! marked for fan-out, and any relay's sweep makes it after
//! [`FAN_OUT_LATE`]: each copy is admitted only if its id is new to its
//! endpoint's queue, so a fan-out made twice makes each copy once.
//!
//! A copy its endpoint's queue has no room for follows the endpoint's
//! overflow policy, as an admission does, except that it is never refused:
//! it is evicted's victim (head-drop) or a dead letter (`overflow`), in
//! the fleet's dead letters, recoverable. The relay that delivers a copy
//! records each attempt and its end in Redis beside the event
//! ([`Reports`]); a copy's state reads those, else its status in its
//! endpoint's queue.
//!
//! Applications are kept in the fleet's map of destinations, as
//! `app:NAME` ([`super::change::put_app`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::FleetQueue;
use super::redis::events::{CopyRead, Ended, Posted, RedisEvents};
use super::redis::queue::Admission;
use super::redis::queue_status::JobState;
use super::shared::Shared;
use crate::catalog::App;
use crate::catalog::edit::Precondition;
use crate::domain::event_copy::{CopyReports, EventCopy};
use crate::domain::job::{EventOf, Job, unix_ms};
use crate::domain::names::scoped_key;
use crate::events::read::Page;
use crate::events::record::{CopyRecord, CopyState, EventRecord, Told};
use crate::queue::events::{EventPost, EventTaken, Events, MOST_RECOVERED, SendAgain};
use crate::queue::local::events::{id_at, next_id};
use crate::queue::quotas::EventCharge;
use crate::queue::refusal::{Cause, ChangeRefused, Refusal, Store};
use crate::telemetry::{EVENT_COPIES, EVENTS};

/// How long an event may wait for its fan-out before any relay makes it
/// (the relay that took it died first).
pub(crate) const FAN_OUT_LATE: Duration = Duration::from_secs(5);
/// How often each relay looks for such events.
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// Copies one fan-out queues at once.
const AT_ONCE: usize = 16;
/// Fan-outs one relay makes at once (a post beyond them waits).
pub(crate) const FAN_OUTS: usize = 16;
/// The most events a listing reads to fill one page (the rest come with
/// its cursor).
const MAX_SCAN: usize = 10_000;
/// How long a recover waits between looks for room in its endpoint's
/// queue.
const ROOM_POLL: Duration = Duration::from_millis(200);

/// Where a copy this relay delivers tells its attempts and its end: the
/// fleet's events in Redis (not awaited by the delivery).
pub(crate) struct Reports(pub(crate) RedisEvents);

impl CopyReports for Reports {
    fn tell(&self, copy: &EventCopy, told: Told) {
        let store = self.0.clone();
        let (app, id, endpoint) = (copy.app.clone(), copy.seq, copy.endpoint.clone());
        tokio::spawn(async move {
            let written = match told {
                Told::Attempt { attempt, ended } => {
                    let ended = match ended {
                        Some(CopyState::Delivered) => Ended::Delivered,
                        _ => Ended::No,
                    };
                    store.attempted(&app, id, &endpoint, &attempt, ended).await
                }
                Told::DeadLettered(reason) => {
                    store
                        .ended(&app, id, &endpoint, Ended::DeadLettered(reason))
                        .await
                }
            };
            if let Err(e) = written {
                tracing::warn!(error = %e, event = id, endpoint = %endpoint, "the fleet's events: a copy's attempt or end was not recorded");
            }
        });
    }
}

/// A copy of `record` as its endpoints' queues hold it.
fn copy_bytes(record: &EventRecord, payload: &[u8]) -> Vec<u8> {
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
enum Queued {
    /// Queued (or queued before: a fan-out made twice).
    Yes,
    /// Its queue was full: a dead letter (`overflow`).
    Overflow,
    /// A copy with its id is still in its queue (a resend of one pending).
    Held,
    /// The endpoint is gone (deleted).
    Gone,
    /// Redis did not take it.
    Failed(String),
}

/// Queues `endpoint`'s copy of event `id` (`bytes`), only if new to its
/// queue (`fresh`: a fan-out) or also again once ended (a resend).
async fn queue_copy(
    shared: &Shared,
    app: &str,
    id: u64,
    endpoint: &str,
    bytes: &[u8],
    owner: Option<&str>,
    fresh: bool,
) -> Queued {
    let Some(lane) = shared.lane(endpoint).filter(|l| l.open) else {
        return Queued::Gone;
    };
    let sid = id.to_string();
    let bound = lane.bound_now();
    let mut answer = lane
        .queue
        .admit_copy(&sid, bytes, bound, owner, (fresh, false))
        .await;
    if let Ok(Admission::Full { .. }) = answer {
        // Head-drop with every entry claimed: nothing to evict.
        answer = lane
            .queue
            .admit_copy(&sid, bytes, bound, owner, (fresh, true))
            .await;
    }
    let counts = &lane.counts;
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
            if let Ok(other) = evicted.parse::<u64>()
                && let Err(e) = shared
                    .events
                    .ended(app, other, endpoint, Ended::DeadLettered("evicted".into()))
                    .await
            {
                tracing::debug!(error = %e, "the fleet's events: an evicted copy's end was not recorded");
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

/// Queues every copy of event `id` (`record`, `payload`), [`AT_ONCE`] at
/// a time, then marks it fanned out. Whether every copy found its place
/// (else the sweep tries again).
async fn fan_out(shared: Arc<Shared>, id: u64, record: Arc<EventRecord>, payload: &[u8]) -> bool {
    let bytes: Arc<[u8]> = Arc::from(copy_bytes(&record, payload));
    let mut whole = true;
    for chunk in record.copies.chunks(AT_ONCE) {
        let mut set = tokio::task::JoinSet::new();
        for endpoint in chunk {
            let (shared, record, bytes) = (shared.clone(), record.clone(), bytes.clone());
            let endpoint = endpoint.clone();
            set.spawn(async move {
                let owner = record.tenant.as_deref();
                let queued =
                    queue_copy(&shared, &record.app, id, &endpoint, &bytes, owner, true).await;
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
                    // Deleted between the event's 202 and its fan-out.
                    metrics::counter!(EVENT_COPIES, "outcome" => "overflow").increment(1);
                    let ended = Ended::DeadLettered("destination-deleted".into());
                    if let Err(e) = shared.events.ended(&record.app, id, &endpoint, ended).await {
                        tracing::warn!(error = %e, "the fleet's events: a copy of a deleted endpoint was not recorded");
                        whole = false;
                    }
                }
                Queued::Failed(e) => {
                    tracing::warn!(error = %e, event = id, endpoint = %endpoint, "the fleet's events: a copy was not queued; the sweep tries again");
                    whole = false;
                }
            }
        }
    }
    if whole && let Err(e) = shared.events.fanned_out(&record.app, id).await {
        tracing::debug!(error = %e, "the fleet's events: a fan-out's end was not recorded; the sweep ends it");
    }
    whole
}

/// Until the relay stops: every [`SWEEP_EVERY`], the events of every
/// application taken more than [`FAN_OUT_LATE`] ago and not yet fanned
/// out are fanned out here.
pub(crate) async fn sweep(queue: Weak<FleetQueue>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(q) = queue.upgrade() else { return };
        if q.catalog.is_closing() {
            return;
        }
        let before = id_at(unix_ms().saturating_sub(FAN_OUT_LATE.as_millis() as u64));
        let mut after: Option<String> = None;
        loop {
            let (apps, next) = q.catalog.apps_page(after.as_deref(), 256);
            for (app, _) in &apps {
                q.fan_out_late(app, before).await;
            }
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
    }
}

/// A copy as recorded, its state its status in its endpoint's queue (the
/// latest: a redriven letter is queued again there first) while that is
/// kept, else the end recorded beside the event.
fn copy_record(read: CopyRead, status: Option<JobState>) -> CopyRecord {
    let reason = match &read.ended {
        Ended::DeadLettered(r) => Some(r.clone()),
        _ => None,
    };
    let (state, reason) = match (status, read.ended) {
        (Some(JobState::Delivered), _) => (CopyState::Delivered, None),
        (Some(JobState::DeadLettered), _) => (CopyState::DeadLettered, reason),
        (Some(_), _) => (CopyState::Pending, None),
        (None, Ended::Delivered) => (CopyState::Delivered, None),
        (None, Ended::DeadLettered(_)) => (CopyState::DeadLettered, reason),
        (None, Ended::No) => (CopyState::Pending, None),
    };
    CopyRecord {
        state,
        reason,
        attempts: read.attempts,
        resent: read.resent,
    }
}

impl FleetQueue {
    /// Fans out `app`'s events taken before `before` (an id) and not yet
    /// fanned out.
    async fn fan_out_late(&self, app: &str, before: u64) {
        let ids = match self.shared.events.unqueued(app, before, 64).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::debug!(error = %e, "the fleet's events: late fan-outs not read");
                return;
            }
        };
        for id in ids {
            let (Ok(Some(record)), Ok(payload)) = (
                self.shared.events.record(app, id).await,
                self.shared.events.payload(app, id).await,
            ) else {
                continue;
            };
            let payload = payload.unwrap_or_default();
            if fan_out(self.shared.clone(), id, Arc::new(record), &payload).await {
                tracing::info!(app = %app, event = id, "an event's fan-out left unfinished was made");
            }
        }
    }

    /// The copies of `app`'s event `id` to `endpoints`, states filled.
    async fn copies_of(
        &self,
        app: &str,
        id: u64,
        endpoints: &[String],
    ) -> Result<Vec<CopyRecord>, String> {
        let reads = self
            .shared
            .events
            .copies(app, id, endpoints)
            .await
            .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(reads.len());
        for (read, endpoint) in reads.into_iter().zip(endpoints) {
            let status = match self.shared.lane(endpoint) {
                Some(lane) => lane
                    .queue
                    .status(&id.to_string())
                    .await
                    .ok()
                    .flatten()
                    .map(|s| s.state),
                None => None,
            };
            out.push(copy_record(read, status));
        }
        Ok(out)
    }

    /// Sends `endpoint`'s copies of `app`'s events `ids` (each ended)
    /// again, as its queue has room: a dead letter goes back from the
    /// dead letters (so it is not redriven twice), a delivered copy is
    /// queued anew. In a task of its own; ends when the endpoint closes.
    fn send_again(&self, app: &str, endpoint: &str, ids: Vec<u64>) {
        let (shared, catalog) = (self.shared.clone(), self.catalog.clone());
        let (app, endpoint) = (app.to_owned(), endpoint.to_owned());
        tokio::spawn(async move {
            let mut left: Vec<u64> = ids;
            while !left.is_empty() {
                let Some(lane) = shared.lane(&endpoint).filter(|l| l.open) else {
                    tracing::warn!(endpoint = %endpoint, left = left.len(), "copies to send again were left: the endpoint was deleted");
                    return;
                };
                if catalog.is_closing() {
                    return;
                }
                let depth = lane.queue.depth().await.unwrap_or(u64::MAX);
                let room = usize::try_from(lane.bound_now().saturating_sub(depth)).unwrap_or(0);
                if room == 0 {
                    tokio::time::sleep(ROOM_POLL).await;
                    continue;
                }
                let now: Vec<u64> = left.drain(..room.min(left.len())).collect();
                let wanted: HashSet<String> = now.iter().map(u64::to_string).collect();
                // Those in the dead letters go back from there.
                let letters = letters_of(&lane, &wanted).await;
                if !letters.is_empty() {
                    let entries: Vec<String> = letters.values().cloned().collect();
                    if let Err(e) = lane.queue.redrive(&entries, lane.bound_now()).await {
                        tracing::warn!(error = %e, "the fleet's events: copies were not sent again");
                    }
                }
                for id in now
                    .iter()
                    .filter(|id| !letters.contains_key(&id.to_string()))
                {
                    let (Ok(Some(record)), Ok(payload)) = (
                        shared.events.record(&app, *id).await,
                        shared.events.payload(&app, *id).await,
                    ) else {
                        continue;
                    };
                    let bytes = copy_bytes(&record, &payload.unwrap_or_default());
                    let owner = record.tenant.as_deref();
                    let queued =
                        queue_copy(&shared, &app, *id, &endpoint, &bytes, owner, false).await;
                    if let Queued::Failed(e) = queued {
                        tracing::warn!(error = %e, event = id, "the fleet's events: a copy was not sent again");
                    }
                }
            }
        });
    }
}

/// The entries of `wanted` (job ids) in `lane`'s dead letters.
async fn letters_of(lane: &super::lane::Lane, wanted: &HashSet<String>) -> HashMap<String, String> {
    let mut found = HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let Ok(got) = lane.queue.dead_letters(after.as_deref(), 512).await else {
            break;
        };
        let Some(last) = got.last() else { break };
        after = Some(last.entry.clone());
        let n = got.len();
        for d in got {
            if wanted.contains(&d.id) {
                found.insert(d.id, d.entry);
            }
        }
        if n < 512 || found.len() == wanted.len() {
            break;
        }
    }
    found
}

/// An application's events newest first, read a batch at a time: what a
/// listing pages through.
struct Scan<'a> {
    events: &'a RedisEvents,
    app: &'a str,
    cursor: Option<u64>,
    batch: std::vec::IntoIter<(u64, Option<EventRecord>)>,
    last: bool,
    /// Events handed out so far.
    scanned: usize,
}

impl<'a> Scan<'a> {
    /// `app`'s events before `before` (`None`: from the newest).
    fn new(events: &'a RedisEvents, app: &'a str, before: Option<u64>) -> Scan<'a> {
        Scan {
            events,
            app,
            cursor: before,
            batch: Vec::new().into_iter(),
            last: false,
            scanned: 0,
        }
    }

    /// The next event still kept, newest first (`None`: no more).
    async fn next(&mut self) -> Result<Option<(u64, EventRecord)>, String> {
        loop {
            if let Some((id, record)) = self.batch.next() {
                self.cursor = Some(id);
                if let Some(r) = record {
                    self.scanned += 1;
                    return Ok(Some((id, r)));
                }
                continue;
            }
            if self.last {
                return Ok(None);
            }
            let err = |e: dripfeed::global::RedisError| e.to_string();
            let ids = self
                .events
                .newest(self.app, self.cursor, 256)
                .await
                .map_err(err)?;
            let records = self.events.records(self.app, &ids).await.map_err(err)?;
            self.last = ids.len() < 256;
            self.batch = ids.into_iter().zip(records).collect::<Vec<_>>().into_iter();
        }
    }
}

#[async_trait::async_trait]
impl Events for FleetQueue {
    async fn post(&self, p: EventPost) -> Result<EventTaken, Refusal> {
        // The tenant's quota: one event, one charge, however many copies;
        // given back if the event is not taken (or was taken before).
        let quotas = p.charged.then(|| self.shared.quotas()).flatten();
        let charge = EventCharge::take(quotas, p.tenant.scope()).await?;
        let give_back = || charge.give_back();
        // A place among the fan-outs under way: held until every copy is
        // queued (waited for, so a burst of posts slows to Redis's pace).
        let Ok(place) = self.fanning.clone().acquire_owned().await else {
            give_back().await;
            return Err(Refusal::now(Cause::Closed));
        };
        // Held until every copy is queued: a deletion waits for them.
        let passes = self.catalog.subscribed(&p.app, &p.kind, &p.json);
        let record = EventRecord {
            app: p.app,
            kind: p.kind,
            created_ms: unix_ms(),
            tenant: p.tenant.named.clone(),
            key: p.key.clone(),
            copies: passes.iter().map(|pass| pass.name().to_string()).collect(),
        };
        let scoped = p.key.as_deref().map(|k| scoped_key(p.tenant.scope(), k));
        let oldest = id_at(unix_ms().saturating_sub(self.shared.events.retention_ms()));
        let events = &self.shared.events;
        // With replicas to wait for, on a connection of its own (WAIT
        // holds up the one it is sent on), pinned to one server.
        let pinned = match self.shared.waiting() {
            (Some(conn), replicas) if replicas > 0 => match conn.pinned().await {
                Ok(c) => Some((c, replicas)),
                Err(e) => {
                    give_back().await;
                    tracing::warn!(error = %e, "the fleet's events: no connection to post on: refused");
                    return Err(Refusal::after(
                        Cause::Unavailable(Store::Queue),
                        Duration::from_secs(1),
                    ));
                }
            },
            _ => None,
        };
        let mut answer = Ok(Posted::Taken);
        let mut id = 0;
        for _ in 0..4 {
            id = next_id();
            let on = pinned.as_ref().map(|(c, _)| c);
            answer = events
                .post(on, id, &record, &p.payload, scoped.as_deref(), oldest)
                .await;
            if !matches!(answer, Ok(Posted::Taken)) {
                break;
            }
        }
        match answer {
            Ok(Posted::New) => {}
            Ok(Posted::Repeat { id, copies }) => {
                give_back().await;
                metrics::counter!(EVENTS, "result" => "duplicate").increment(1);
                return Ok(EventTaken {
                    id,
                    endpoints: copies,
                    duplicate: true,
                });
            }
            Ok(Posted::Taken) | Err(_) => {
                if let Err(e) = answer {
                    tracing::warn!(error = %e, "the fleet's events: an event could not be written: refused");
                }
                give_back().await;
                return Err(Refusal::after(
                    Cause::Unavailable(Store::Queue),
                    Duration::from_secs(1),
                ));
            }
        }
        let unconfirmed = match &pinned {
            Some((conn, replicas)) => events.wait(conn, *replicas).await,
            None => None,
        };
        let result = if record.copies.is_empty() {
            "no_endpoints"
        } else {
            "fanned_out"
        };
        metrics::counter!(EVENTS, "result" => result).increment(1);
        let endpoints = record.copies.len();
        if endpoints > 0 {
            let shared = self.shared.clone();
            let payload = p.payload;
            tokio::spawn(async move {
                fan_out(shared, id, Arc::new(record), &payload).await;
                drop((passes, place));
            });
        }
        if let Some(replicas) = unconfirmed {
            // Taken, and fanned out: a retry with the same key is safe.
            return Err(Refusal::after(
                Cause::Unreplicated(replicas),
                Duration::from_secs(1),
            ));
        }
        Ok(EventTaken {
            id,
            endpoints,
            duplicate: false,
        })
    }

    async fn event(
        &self,
        app: &str,
        id: u64,
    ) -> Result<Option<(EventRecord, Vec<(String, CopyRecord)>)>, String> {
        let Some(record) = self
            .shared
            .events
            .record(app, id)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let copies = self.copies_of(app, id, &record.copies).await?;
        let named = record.copies.iter().cloned().zip(copies).collect();
        Ok(Some((record, named)))
    }

    async fn payload(&self, app: &str, id: u64) -> Result<Option<Vec<u8>>, String> {
        self.shared
            .events
            .payload(app, id)
            .await
            .map_err(|e| e.to_string())
    }

    async fn list(
        &self,
        app: &str,
        kind: Option<&str>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, EventRecord)>, String> {
        let mut scan = Scan::new(&self.shared.events, app, before);
        let mut items = Vec::new();
        while let Some((id, record)) = scan.next().await? {
            if items.len() == limit || scan.scanned > MAX_SCAN {
                return Ok(Page::more(items, id));
            }
            if kind.is_none_or(|k| record.kind == k) {
                items.push((id, record));
            }
        }
        Ok(Page { items, next: None })
    }

    async fn copies(
        &self,
        app: &str,
        endpoint: &str,
        failed: Option<bool>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, String, CopyRecord)>, String> {
        let mut scan = Scan::new(&self.shared.events, app, before);
        let one = [endpoint.to_owned()];
        let mut items = Vec::new();
        while let Some((id, record)) = scan.next().await? {
            if items.len() == limit || scan.scanned > MAX_SCAN {
                return Ok(Page::more(items, id));
            }
            if !record.copies.iter().any(|c| c == endpoint) {
                continue;
            }
            let Some(copy) = self.copies_of(app, id, &one).await?.pop() else {
                continue;
            };
            let wanted = match failed {
                None => true,
                Some(true) => copy.failed(),
                Some(false) => copy.state == CopyState::Delivered,
            };
            if wanted {
                items.push((id, record.kind, copy));
            }
        }
        Ok(Page { items, next: None })
    }

    async fn resend(&self, app: &str, id: u64, endpoint: &str) -> Result<(), SendAgain> {
        let record = self
            .shared
            .events
            .record(app, id)
            .await
            .map_err(|e| SendAgain::Failed(e.to_string()))?
            .ok_or(SendAgain::NotFound)?;
        if !record.copies.iter().any(|c| c == endpoint) {
            return Err(SendAgain::NotFound);
        }
        if self.shared.lane(endpoint).filter(|l| l.open).is_none() {
            return Err(SendAgain::Gone);
        }
        let copy = self
            .copies_of(app, id, &[endpoint.to_owned()])
            .await
            .map_err(SendAgain::Failed)?
            .pop()
            .ok_or(SendAgain::NotFound)?;
        if copy.state == CopyState::Pending {
            return Err(SendAgain::Pending);
        }
        self.shared
            .events
            .again(app, id, endpoint)
            .await
            .map_err(|e| SendAgain::Failed(e.to_string()))?;
        if copy.state == CopyState::DeadLettered {
            self.send_again(app, endpoint, vec![id]);
            return Ok(());
        }
        let payload = self
            .shared
            .events
            .payload(app, id)
            .await
            .map_err(|e| SendAgain::Failed(e.to_string()))?
            .unwrap_or_default();
        let bytes = copy_bytes(&record, &payload);
        let owner = record.tenant.as_deref();
        match queue_copy(&self.shared, app, id, endpoint, &bytes, owner, false).await {
            Queued::Yes | Queued::Overflow => Ok(()),
            Queued::Held => Err(SendAgain::Pending),
            Queued::Gone => Err(SendAgain::Gone),
            Queued::Failed(e) => Err(SendAgain::Failed(e)),
        }
    }

    async fn recover(
        &self,
        app: &str,
        endpoint: &str,
        window: (u64, u64),
    ) -> Result<(usize, bool), SendAgain> {
        if self.shared.lane(endpoint).filter(|l| l.open).is_none() {
            return Err(SendAgain::Gone);
        }
        let events = &self.shared.events;
        let failed = |e: dripfeed::global::RedisError| SendAgain::Failed(e.to_string());
        let one = [endpoint.to_owned()];
        let (mut dead, mut more, mut from) = (Vec::new(), false, window.0);
        'window: loop {
            let ids = events
                .window(app, (from, window.1), 256)
                .await
                .map_err(failed)?;
            let records = events.records(app, &ids).await.map_err(failed)?;
            let n = ids.len();
            for (id, record) in ids.into_iter().zip(records) {
                from = id.saturating_add(1);
                if !record.is_some_and(|r| r.copies.iter().any(|c| c == endpoint)) {
                    continue;
                }
                let copy = self
                    .copies_of(app, id, &one)
                    .await
                    .map_err(SendAgain::Failed)?;
                if copy
                    .first()
                    .is_some_and(|c| c.state == CopyState::DeadLettered)
                {
                    if dead.len() == MOST_RECOVERED {
                        more = true;
                        break 'window;
                    }
                    dead.push(id);
                }
            }
            if n < 256 {
                break;
            }
        }
        // Marked sent again first (its end cleared): read back as pending.
        for id in &dead {
            events.again(app, *id, endpoint).await.map_err(failed)?;
        }
        let sent = dead.len();
        self.send_again(app, endpoint, dead);
        Ok((sent, more))
    }

    async fn put_app(&self, name: &str, app: App) -> Result<bool, ChangeRefused> {
        super::change::put_app(self, name, app).await
    }

    async fn delete_app(&self, name: &str) -> Result<usize, ChangeRefused> {
        let endpoints = self.catalog.endpoints_of(name);
        let mut deleted = 0;
        for endpoint in endpoints {
            let pre = Precondition::default();
            let reason = Some("application-deleted");
            match super::change::delete_for(self, &endpoint, &pre, reason).await {
                Ok(_) => deleted += 1,
                Err(e) if e.status == 404 => {}
                Err(e) => return Err(e),
            }
        }
        super::change::forget_app(self, name).await?;
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_reads_its_end_else_its_queue() {
        let read = |ended| CopyRead {
            ended,
            resent: 0,
            attempts: Vec::new(),
        };
        let dead = || Ended::DeadLettered("overflow".into());
        let c = copy_record(read(dead()), Some(JobState::DeadLettered));
        assert_eq!(
            (c.state, c.reason.as_deref()),
            (CopyState::DeadLettered, Some("overflow"))
        );
        // Redriven: queued again in its queue before anything records it.
        let c = copy_record(read(dead()), Some(JobState::Queued));
        assert_eq!((c.state, c.reason), (CopyState::Pending, None));
        let c = copy_record(read(Ended::No), Some(JobState::Delivered));
        assert_eq!(c.state, CopyState::Delivered);
        for s in [None, Some(JobState::InFlight), Some(JobState::RetryWaiting)] {
            assert_eq!(copy_record(read(Ended::No), s).state, CopyState::Pending);
        }
        // Its status forgotten: what was recorded.
        assert_eq!(
            copy_record(read(Ended::Delivered), None).state,
            CopyState::Delivered
        );
        assert_eq!(
            copy_record(read(dead()), None).state,
            CopyState::DeadLettered
        );
    }

    #[test]
    fn a_copy_carries_its_event() {
        let record = EventRecord {
            app: "shop".into(),
            kind: "invoice.paid".into(),
            created_ms: 7,
            tenant: Some("acme".into()),
            key: None,
            copies: vec!["a".into()],
        };
        let bytes = copy_bytes(&record, b"{\"n\":1}");
        let job = <Job as dripfeed::journal::JobCodec>::decode(&bytes).unwrap();
        let of = job.event_of.unwrap();
        assert_eq!((&*of.app, &*of.kind), ("shop", "invoice.paid"));
        assert_eq!(
            (&job.body[..], job.tenant.as_deref()),
            (&b"{\"n\":1}"[..], Some("acme"))
        );
        assert_eq!(job.received_unix_ms, 7);
    }
}
