//! The fleet's events (`queue = redis`): an event is taken in one Redis
//! script, durable with the list of endpoints its copies go to before its
//! 202 ([`post`](super::redis::events::RedisEvents::post)), then fanned out: each copy queued into its
//! endpoint's queue under the event's id, in a task of the relay that took
//! it. A relay that dies before it has queued every copy leaves the event
//! marked for fan-out, and any relay's sweep makes it after
//! [`fan_out::FAN_OUT_LATE`] ([`fan_out`]): each copy is admitted only if
//! its id is new to its endpoint's queue (while its status is kept,
//! `status_retention`), so a fan-out made twice makes each copy once.
//!
//! A copy its endpoint's queue has no room for follows the endpoint's
//! overflow policy, as an admission does, except that it is never refused:
//! it is evicted's victim (head-drop) or a dead letter (`overflow`), in
//! the fleet's dead letters, recoverable. The relay that delivers a copy
//! records each attempt and its end in Redis beside the event
//! ([`Reports`](super::reports::Reports)); a copy's state is its status in its endpoint's queue
//! while that is kept, else the end recorded. Resend and recover grant
//! each copy once and send it as its queue has room ([`again`]).
//!
//! Applications are kept in the fleet's map of destinations, as
//! `app:NAME` ([`super::change::put_app`]).

mod again;
mod fan_out;
mod scan;

use std::sync::Arc;
use std::time::Duration;

use super::FleetQueue;
use super::redis::events::{Bounds, CopyRead, Ended, Posted};
use super::redis::queue::Again;
use super::redis::queue_status::JobState;
use crate::catalog::App;
use crate::catalog::edit::Precondition;
use crate::domain::job::unix_ms;
use crate::events::id::{id_at, next_id_after};
use crate::events::read::Page;
use crate::events::record::{CopyRecord, CopyState, EventRecord};
use crate::queue::event_charge::EventCharge;
use crate::queue::events::{EventPost, EventTaken, Events, MOST_RECOVERED, SendAgain};
use crate::queue::refusal::{Cause, ChangeRefused, Refusal, Store};
use crate::telemetry::EVENTS;
use fan_out::{Queued, copy_bytes, queue_copy};
use scan::Scan;

pub(crate) use fan_out::{FAN_OUTS, Fan, sweep};

/// The most events a listing reads to fill one page (the rest come with
/// its cursor).
const MAX_SCAN: usize = 10_000;
/// How long a copy granted a resend reads as pending although its queue
/// still says dead-lettered (its letter not yet put back: the endpoint's
/// queue was full, or the relay sending it died): after it, it reads as
/// dead-lettered again, and a recover grants it again.
const AGAIN_HOLD_MS: u64 = 10 * 60 * 1000;

/// A copy as recorded, its state its status in its endpoint's queue (the
/// latest: a redriven letter is queued again there first) while that is
/// kept, else the end recorded beside the event; granted a resend within
/// [`AGAIN_HOLD_MS`] before `now_ms`, pending.
fn copy_record(read: CopyRead, status: Option<JobState>, now_ms: u64) -> CopyRecord {
    let again = matches!(read.ended, Ended::Again(at) if now_ms < at.saturating_add(AGAIN_HOLD_MS));
    let (state, reason) = match (status, read.ended) {
        _ if again => (CopyState::Pending, None),
        (Some(JobState::Delivered), _) => (CopyState::Delivered, None),
        (Some(JobState::DeadLettered), Ended::DeadLettered(r)) => {
            (CopyState::DeadLettered, Some(r))
        }
        (Some(JobState::DeadLettered), _) => (CopyState::DeadLettered, None),
        (Some(_), _) => (CopyState::Pending, None),
        (None, Ended::Delivered) => (CopyState::Delivered, None),
        (None, Ended::DeadLettered(r)) => (CopyState::DeadLettered, Some(r)),
        (None, Ended::No | Ended::Again(_)) => (CopyState::Pending, None),
    };
    CopyRecord {
        state,
        reason,
        attempts: read.attempts,
        resent: read.resent,
        // The fleet counts a copy's attempts in its queue's status.
        made: None,
        round_from: 0,
        retry_at_ms: None,
    }
}

impl FleetQueue {
    /// Sends `endpoint`'s dead-lettered copies of `app`'s events `ids`
    /// again ([`again::send_again`]): those its queue has room for before
    /// it returns.
    async fn send_again(&self, app: &str, endpoint: &str, ids: Vec<u64>) {
        let (shared, catalog) = (self.shared.clone(), self.catalog.clone());
        again::send_again(shared, catalog, app.to_owned(), endpoint.to_owned(), ids).await;
    }

    /// What a fan-out needs.
    pub(crate) fn fan(&self) -> Fan {
        Fan {
            shared: self.shared.clone(),
            catalog: self.catalog.clone(),
            changes: self.changes.clone(),
        }
    }

    /// Whether event `id`, taken before under the same key, is `record`'s
    /// type with `payload`: a repeat, not a key used again for another
    /// event. One that cannot be read (forgotten meanwhile, Redis away)
    /// counts as the same, as a key alone did before.
    async fn same_event(&self, record: &EventRecord, payload: &[u8], id: u64) -> bool {
        let events = &self.shared.events;
        let kind = match events.record(&record.app, id).await {
            Ok(Some(first)) => first.kind,
            _ => return true,
        };
        match events.payload(&record.app, id).await {
            Ok(Some(first)) => kind == record.kind && first == payload,
            _ => true,
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
        let now_ms = unix_ms();
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
            out.push(copy_record(read, status, now_ms));
        }
        Ok(out)
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
        // Keys are the application's (scoped by tenant at intake), as in
        // the local engine.
        let key = p.key.as_deref();
        // ...and this application's, not an earlier one's of the name (its
        // id past the application's `since`, whatever this relay's clock).
        let since = self.catalog.since_of(&record.app);
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
        // Noted before it is written: a relay that dies between the two
        // leaves the application for the sweep to look at.
        if let Err(e) = events.posting(&record.app, unix_ms()).await {
            give_back().await;
            tracing::warn!(error = %e, "the fleet's events: an event could not be written: refused");
            return Err(Refusal::after(
                Cause::Unavailable(Store::Queue),
                Duration::from_secs(1),
            ));
        }
        let mut answer = Ok(Posted::Taken);
        let mut id = 0;
        for _ in 0..4 {
            id = next_id_after(since);
            let on = pinned.as_ref().map(|(c, _)| c);
            let bounds = Bounds { oldest, since };
            answer = events.post(on, id, &record, &p.payload, key, bounds).await;
            if !matches!(answer, Ok(Posted::Taken)) {
                break;
            }
        }
        let unconfirmed = match &pinned {
            Some((conn, replicas)) if answer.is_ok() => events.wait(conn, *replicas).await,
            _ => None,
        };
        match answer {
            Ok(Posted::New) => {}
            Ok(Posted::Repeat { id, copies }) => {
                give_back().await;
                if !self.same_event(&record, &p.payload, id).await {
                    return Err(Refusal::now(Cause::KeyReused));
                }
                metrics::counter!(EVENTS, "result" => "duplicate").increment(1);
                if let Some(replicas) = unconfirmed {
                    // The first post's, written again: not confirmed yet.
                    return Err(Refusal::after(
                        Cause::Unreplicated(replicas, id),
                        Duration::from_secs(1),
                    ));
                }
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
        let result = if record.copies.is_empty() {
            "no_endpoints"
        } else {
            "fanned_out"
        };
        metrics::counter!(EVENTS, "result" => result).increment(1);
        let endpoints = record.copies.len();
        if endpoints > 0 {
            let (fan, payload) = (self.fan(), p.payload);
            tokio::spawn(async move {
                fan.fan_out(id, Arc::new(record), &payload).await;
                drop((passes, place));
            });
        }
        if let Some(replicas) = unconfirmed {
            // Taken, and fanned out: a retry with the same key is safe.
            return Err(Refusal::after(
                Cause::Unreplicated(replicas, id),
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
            if scan.scanned > MAX_SCAN {
                return Ok(Page::more(items, id));
            }
            if kind.is_some_and(|k| record.kind != k) {
                continue;
            }
            // A full page names a next one only when one more matches: a
            // page that ends the listing says so (no empty page after it).
            if items.len() == limit {
                return Ok(Page::more(items, id));
            }
            items.push((id, record));
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
            if scan.scanned > MAX_SCAN {
                return Ok(Page::more(items, id));
            }
            if !record.copies.iter().any(|c| c == endpoint) {
                continue;
            }
            let Some(copy) = self.copies_of(app, id, &one).await?.pop() else {
                continue;
            };
            if !copy.listed(failed) {
                continue;
            }
            // As for events: a next page only when one more is listed.
            if items.len() == limit {
                return Ok(Page::more(items, id));
            }
            items.push((id, record.kind, copy));
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
        // Granted once: of two resends at once, one sends it.
        let granted = self
            .shared
            .events
            .again(app, id, endpoint, AGAIN_HOLD_MS)
            .await
            .map_err(|e| SendAgain::Failed(e.to_string()))?;
        if !granted {
            return Err(SendAgain::Pending);
        }
        if copy.state == CopyState::DeadLettered {
            self.send_again(app, endpoint, vec![id]).await;
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
        match queue_copy(&self.shared, app, id, endpoint, &bytes, owner, Again::Ended).await {
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
        // Granted first, each once (read back as pending from then on: a
        // recover made again meanwhile does not grant it again).
        let mut granted = Vec::with_capacity(dead.len());
        for id in dead {
            if events
                .again(app, id, endpoint, AGAIN_HOLD_MS)
                .await
                .map_err(failed)?
            {
                granted.push(id);
            }
        }
        let sent = granted.len();
        self.send_again(app, endpoint, granted).await;
        Ok((sent, more))
    }

    async fn put_app(
        &self,
        name: &str,
        app: App,
        pre: &Precondition,
    ) -> Result<(bool, App), ChangeRefused> {
        super::change::put_app(self, name, app, pre).await
    }

    async fn delete_app(&self, name: &str, pre: &Precondition) -> Result<usize, ChangeRefused> {
        super::change::delete_app(self, name, pre).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::Job;

    const NOW: u64 = 1_795_923_402_309;

    #[test]
    fn a_copy_reads_its_end_else_its_queue() {
        let read = |ended| CopyRead {
            ended,
            resent: 0,
            attempts: Vec::new(),
        };
        let dead = || Ended::DeadLettered("overflow".into());
        let c = copy_record(read(dead()), Some(JobState::DeadLettered), NOW);
        assert_eq!(
            (c.state, c.reason.as_deref()),
            (CopyState::DeadLettered, Some("overflow"))
        );
        // Redriven: queued again in its queue before anything records it.
        let c = copy_record(read(dead()), Some(JobState::Queued), NOW);
        assert_eq!((c.state, c.reason), (CopyState::Pending, None));
        let c = copy_record(read(Ended::No), Some(JobState::Delivered), NOW);
        assert_eq!(c.state, CopyState::Delivered);
        for s in [None, Some(JobState::InFlight), Some(JobState::RetryWaiting)] {
            assert_eq!(
                copy_record(read(Ended::No), s, NOW).state,
                CopyState::Pending
            );
        }
        // Granted a resend: pending while its letter goes back, then its
        // queue's word again.
        let again = || Ended::Again(NOW - 1_000);
        let c = copy_record(read(again()), Some(JobState::DeadLettered), NOW);
        assert_eq!(c.state, CopyState::Pending);
        let late = NOW + AGAIN_HOLD_MS;
        let c = copy_record(read(again()), Some(JobState::DeadLettered), late);
        assert_eq!(c.state, CopyState::DeadLettered);
        // Its status forgotten: what was recorded.
        assert_eq!(
            copy_record(read(Ended::Delivered), None, NOW).state,
            CopyState::Delivered
        );
        assert_eq!(
            copy_record(read(dead()), None, NOW).state,
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
        let of = job.event_of.clone().unwrap();
        assert_eq!((&*of.app, &*of.kind), ("shop", "invoice.paid"));
        assert_eq!(
            (&job.body[..], job.tenant.as_deref()),
            (&b"{\"n\":1}"[..], Some("acme"))
        );
        assert_eq!(job.received_unix_ms, 7);
    }
}
