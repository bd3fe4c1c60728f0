//! The local engine's events: an event and its copies written to the
//! events store in one transaction (durable before the 202), then each
//! copy submitted to its endpoint's throttle unjournaled (the store keeps
//! it, and a restart sends the pending ones again); a copy the endpoint's
//! queue does not take is dead-lettered with the reason `overflow`.

use std::sync::Arc;

use dripfeed::Submission;

use super::Local;
use super::letters::LetterEnd;
use crate::catalog::App;
use crate::catalog::edit::Precondition;
use crate::domain::budget::JOB_OVERHEAD;
use crate::domain::event_copy::EventCopy;
use crate::domain::job::{Job, unix_ms};
use crate::events::id::next_id_after;
use crate::events::read::Page;
use crate::events::record::{CopyRecord, CopyState, EventRecord};
use crate::queue::contract::{Cause, ChangeRefused, Refusal, Store};
use crate::queue::event_charge::EventCharge;
use crate::queue::events::{EventPost, EventTaken, Events, MOST_RECOVERED, SendAgain};
use crate::telemetry::{EVENT_COPIES, EVENTS};

/// What a copy sent again at a start had tried in its round.
#[derive(Default)]
struct Tried {
    /// Attempts made.
    made: u32,
    /// When its receiver asked to be tried again, ms since the Unix epoch.
    retry_at_ms: Option<u64>,
}

impl Tried {
    /// How long until its receiver's `Retry-After` has passed, if it has
    /// not.
    fn wait(&self) -> Option<std::time::Duration> {
        let left = self.retry_at_ms?.saturating_sub(unix_ms());
        (left > 0).then(|| std::time::Duration::from_millis(left))
    }
}

/// What sends copies: the set, the dead-letter file, the store.
#[derive(Clone)]
struct Sender {
    set: dripfeed::destinations::Destinations<Job>,
    catalog: Arc<crate::catalog::Catalog>,
    sink: Arc<crate::dead_letter::FileSink>,
    store: Arc<crate::events::EventStore>,
    /// `retry_max`: the longest a copy waits for its receiver's time.
    retry_max: std::time::Duration,
}

impl Sender {
    /// Endpoint's copy of event `seq` (`record`) as a job.
    fn job(
        &self,
        seq: u64,
        record: &EventRecord,
        payload: &axum::body::Bytes,
        endpoint: &Arc<str>,
        held: Option<Arc<crate::domain::budget::Ticket>>,
    ) -> Job {
        Job::copy(
            payload.clone(),
            Arc::new(EventCopy {
                seq,
                endpoint: endpoint.clone(),
                app: Arc::from(record.app.as_str()),
                kind: Arc::from(record.kind.as_str()),
                tenant: record.tenant.clone(),
                created_ms: record.created_ms,
                store: self.store.clone(),
                held,
            }),
        )
    }

    /// What a refused copy becomes: dead-lettered with its reason.
    fn refused(&self, endpoint: &str, refused: dripfeed::Rejected<Job>) {
        let stopping =
            refused.reason() == dripfeed::Reason::Closed && self.catalog.is_open(endpoint);
        if stopping && self.store.kept() {
            // The relay is stopping: the copy stays pending in the store,
            // and the next start sends it.
            return;
        }
        let reason = match refused.reason() {
            dripfeed::Reason::Overloaded => "overflow",
            // A store in memory (no journal) ends with the process: the
            // copy goes where the relay's other leftovers go.
            dripfeed::Reason::Closed if stopping => "shutdown",
            dripfeed::Reason::Closed => "closed",
            _ => "refused",
        };
        metrics::counter!(EVENT_COPIES, "outcome" => "overflow").increment(1);
        // The file records it (and tells the store where it is).
        if self.sink.offer(refused.into_job(), reason).is_err() {
            tracing::error!(endpoint = %endpoint, "the dead-letter writer is gone: an event's copy the endpoint's queue refused is only in the events store");
        }
    }

    /// Submits a copy now (never waits): a fan-out's. Whether it was
    /// queued; one not taken follows the endpoint's overflow policy and
    /// is dead-lettered.
    fn send_now(&self, job: Job, endpoint: &Arc<str>) -> bool {
        match self
            .set
            .try_submit(endpoint, Submission::new(job).unjournaled())
        {
            Ok(_) => {
                metrics::counter!(EVENT_COPIES, "outcome" => "queued").increment(1);
                true
            }
            Err(refused) => {
                self.refused(endpoint, refused);
                false
            }
        }
    }

    /// `endpoint`'s copy of event `seq` as a job, read from the store
    /// (`None`: swept meanwhile).
    /// The reason of `endpoint`'s copy of event `seq` if it was
    /// dead-lettered and its letter is still awaited.
    fn awaiting_letter(&self, seq: u64, endpoint: &str) -> Option<String> {
        let copy = self.store.copy(seq, endpoint).ok().flatten()?;
        (copy.state == crate::events::record::CopyState::DeadLettered)
            .then(|| copy.reason.unwrap_or_else(|| "failed".to_owned()))
    }

    /// `endpoint`'s copy of event `seq` as the store keeps it, as a job.
    fn stored_job(&self, seq: u64, endpoint: &Arc<str>) -> Option<Job> {
        self.stored_copy(seq, endpoint).map(|(job, _)| job)
    }

    /// [`stored_job`](Self::stored_job), and what its round tried: the
    /// attempts it made (a copy on its way at a stop goes on from them at
    /// the next start; a resend, a recover or a redrive starts a round)
    /// and when its receiver asked to be tried again.
    fn stored_copy(&self, seq: u64, endpoint: &Arc<str>) -> Option<(Job, Tried)> {
        let (Ok(Some((record, copy))), Ok(payload)) = (
            self.store.event_copy(seq, endpoint),
            self.store.payload(seq),
        ) else {
            return None;
        };
        let tried = copy.as_ref().map_or(Tried::default(), |copy| Tried {
            made: copy.made_this_round(),
            retry_at_ms: copy.retry_at_ms,
        });
        let payload: axum::body::Bytes = payload.unwrap_or_default().into();
        Some((self.job(seq, &record, &payload, endpoint, None), tried))
    }

    /// Offers `job` to `endpoint` once its queue has room, holding a pass
    /// while it is offered (so a deletion never finds it in a destination
    /// taken out of the set, and it never makes one anew): handed back,
    /// [`Unsent`], once the endpoint is closed (deleted) or no longer its
    /// application's. Its attempts go on from the `made` its round had
    /// made.
    async fn offer_when_room(
        &self,
        endpoint: &Arc<str>,
        mut job: Job,
        made: u32,
    ) -> Result<(), Unsent> {
        loop {
            let Some(pass) = self.catalog.open(endpoint) else {
                return Err(Unsent::Closed(job));
            };
            // The endpoint of that name may be another application's now
            // (deleted and made again while this copy waited for room or
            // for its receiver's time): not its copy to send.
            if !self.takes(endpoint, &job) {
                return Err(Unsent::NotTheirs(job));
            }
            let room = self
                .set
                .stats(endpoint)
                .is_none_or(|s| s.held() < s.capacity());
            if room {
                match self.set.try_submit(
                    endpoint,
                    Submission::new(job).unjournaled().attempts_made(made),
                ) {
                    Ok(_) => {
                        metrics::counter!(EVENT_COPIES, "outcome" => "queued").increment(1);
                        return Ok(());
                    }
                    Err(refused) if refused.reason() == dripfeed::Reason::Overloaded => {
                        job = refused.into_job(); // filled meanwhile: wait again
                    }
                    Err(refused) => {
                        self.refused(endpoint, refused);
                        return Ok(());
                    }
                }
            }
            drop(pass);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Whether `endpoint` (the one of that name now) takes `job`, a copy
    /// of its application's event made before it (or not a copy at all).
    fn takes(&self, endpoint: &str, job: &Job) -> bool {
        job.event.as_ref().is_none_or(|copy| {
            self.catalog
                .takes_event(endpoint, Some(&copy.app), copy.seq)
        })
    }

    /// Dead-letters `endpoint`'s copy `job` as its endpoint's deletion's,
    /// or its application's where that is gone (or made again since the
    /// event: a restart after the application's deletion sends its
    /// leftovers here).
    fn deleted(&self, endpoint: &str, job: Job) {
        let app_gone = job.event.as_ref().is_some_and(|copy| {
            self.catalog
                .app(&copy.app)
                .is_none_or(|app| copy.seq < app.since)
        });
        let reason = match app_gone {
            true => "application-deleted",
            false => "destination-deleted",
        };
        if self.sink.offer(job, reason).is_err() {
            tracing::error!(endpoint = %endpoint, "the dead-letter writer is gone: a copy of a deleted endpoint is only in the events store");
        }
    }

    /// Sends `endpoint` its copies of events `seqs` again, in order, each
    /// waiting for room in its queue (a recover or a restart can hold far
    /// more than a queue): one task per endpoint, so a dead one holds up
    /// no other. Once the endpoint is deleted the rest are dead-lettered.
    fn send_waiting(&self, endpoint: Arc<str>, seqs: Vec<u64>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut seqs = seqs.into_iter();
            for seq in seqs.by_ref() {
                let Some((job, tried)) = me.stored_copy(seq, &endpoint) else {
                    continue;
                };
                // An older endpoint's of that name: not worth its wait.
                if !me.takes(&endpoint, &job) {
                    me.deleted(&endpoint, job);
                    continue;
                }
                // Its receiver asked for time: the endpoint's copies wait
                // for it (the same receiver).
                if let Some(wait) = tried.wait() {
                    tokio::time::sleep(wait.min(me.retry_max)).await;
                }
                match me.offer_when_room(&endpoint, job, tried.made).await {
                    Ok(()) => {}
                    // An older copy of a name made again since: the
                    // copies after it may be the new endpoint's.
                    Err(Unsent::NotTheirs(job)) => me.deleted(&endpoint, job),
                    Err(Unsent::Closed(job)) => {
                        me.deleted(&endpoint, job);
                        break;
                    }
                }
            }
            for seq in seqs {
                if let Some(job) = me.stored_job(seq, &endpoint) {
                    me.deleted(&endpoint, job);
                }
            }
        });
    }
}

/// A copy [`offer_when_room`](Sender::offer_when_room) did not send.
enum Unsent {
    /// Its endpoint is closed (deleted): so are the copies after it.
    Closed(Job),
    /// The endpoint of its name is another's now (deleted and made again).
    NotTheirs(Job),
}

impl Local {
    /// A dead letter of `endpoint`'s copy of event `seq` redriven: marked
    /// pending in the store if it has ended, then offered as the copy it
    /// is (its headers, its history): what became of it (see
    /// [`LetterEnd`]); `None` when the store no longer holds that copy
    /// (the letter goes back as a plain webhook).
    pub(crate) async fn redrive_copy(&self, seq: u64, endpoint: &str) -> Option<LetterEnd> {
        let store = self.store().ok()?.clone();
        let (record, copy) = store.event_copy(seq, endpoint).ok()??;
        let copy = copy?;
        // The endpoint of that name now belongs to another application:
        // not its history to send (the letter stays).
        let app = self
            .catalog
            .get(endpoint)
            .and_then(|l| l.dest.endpoint.map(|e| e.application.clone()));
        if app.as_deref() != Some(record.app.as_str()) {
            return Some(LetterEnd::Gone);
        }
        // Delivered since (a recover, a resend), or on its way: done.
        if copy.state != CopyState::DeadLettered {
            return Some(LetterEnd::Settled);
        }
        let payload = store.payload(seq).ok()??;
        let endpoint: Arc<str> = Arc::from(endpoint);
        let Some(_pass) = self.catalog.open(&endpoint) else {
            return Some(LetterEnd::Gone);
        };
        let Ok(granted) = store.again(vec![seq], endpoint.clone()).await else {
            return Some(LetterEnd::Refused); // the store cannot write: the letter stays
        };
        if granted.is_empty() {
            return Some(LetterEnd::Settled); // sent again meanwhile
        }
        let sender = self.sender().ok()?;
        let job = sender.job(seq, &record, &payload.into(), &endpoint, None);
        match self
            .set
            .try_submit(&endpoint, Submission::new(job).unjournaled())
        {
            Ok(_) => {
                metrics::counter!(EVENT_COPIES, "outcome" => "queued").increment(1);
                Some(LetterEnd::Queued)
            }
            Err(_) => {
                // Refused: dead-lettered as it was, by this letter (the
                // store says so; no second line is written).
                store.tell(
                    seq,
                    endpoint,
                    crate::events::record::Told::DeadLettered("overflow".into()),
                );
                Some(LetterEnd::Refused)
            }
        }
    }

    /// The store, or why this relay keeps no events.
    fn store(&self) -> Result<&Arc<crate::events::EventStore>, String> {
        self.events
            .as_ref()
            .ok_or_else(|| "this relay keeps no events".to_owned())
    }

    fn sender(&self) -> Result<Sender, String> {
        Ok(Sender {
            set: self.set.clone(),
            catalog: self.catalog.clone(),
            sink: self.sink.clone(),
            store: self.store()?.clone(),
            retry_max: self.retry_max,
        })
    }

    /// The letters of dead-lettered copies the store still awaited when
    /// the relay stopped: a copy whose line is in the dead-letter file
    /// already (the relay stopped after the line, before the store noted
    /// it) is noted now; the others' letters are written (never sent again,
    /// never lost, one line each).
    fn write_awaited_letters(&self, sender: &Sender, awaited: Vec<(u64, String, String)>) {
        if awaited.is_empty() {
            return;
        }
        let wanted: std::collections::HashSet<(String, String)> = awaited
            .iter()
            .map(|(seq, endpoint, _)| (seq.to_string(), endpoint.clone()))
            .collect();
        let written = crate::dead_letter::page::written(&self.dead_letter_file, &wanted);
        for (seq, endpoint, reason) in awaited {
            let endpoint: Arc<str> = Arc::from(endpoint.as_str());
            if written.contains(&(seq.to_string(), endpoint.to_string())) {
                sender
                    .store
                    .tell(seq, endpoint, crate::events::record::Told::Lettered);
                continue;
            }
            if let Some(job) = sender.stored_job(seq, &endpoint)
                && sender.sink.offer(job, letter_reason(&reason)).is_err()
            {
                tracing::error!(endpoint = %endpoint, "the dead-letter writer is gone: a dead-lettered copy's letter is only in the events store");
            }
        }
    }

    /// Sends the copies a restart finds pending again, each endpoint's in
    /// order and as its queue has room (those of endpoints no longer held
    /// are dead-lettered): how many.
    pub(crate) fn send_pending(&self) -> Result<usize, String> {
        let sender = self.sender()?;
        let mut by_endpoint: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        let mut awaited = Vec::new();
        for (seq, endpoint) in sender.store.pending()? {
            match sender.awaiting_letter(seq, &endpoint) {
                Some(reason) => awaited.push((seq, endpoint, reason)),
                None => by_endpoint.entry(endpoint).or_default().push(seq),
            }
        }
        self.write_awaited_letters(&sender, awaited);
        let mut sent = 0;
        for (endpoint, seqs) in by_endpoint {
            let endpoint: Arc<str> = Arc::from(endpoint.as_str());
            if !self.catalog.is_open(&endpoint) {
                // Its endpoint is gone: each copy to the dead-letter file
                // (which tells the store).
                for seq in seqs {
                    if let Some(job) = sender.stored_job(seq, &endpoint) {
                        sender.deleted(&endpoint, job);
                    }
                }
                continue;
            }
            sent += seqs.len();
            sender.send_waiting(endpoint, seqs);
        }
        Ok(sent)
    }
}

#[async_trait::async_trait]
impl Events for Local {
    async fn post(&self, p: EventPost) -> Result<EventTaken, Refusal> {
        if self.set.is_closed() {
            // Stopping: refused as a webhook is (the copies would be
            // refused by every endpoint's queue).
            return Err(Refusal::now(Cause::Closed));
        }
        let store = self
            .store()
            .map_err(|_| Refusal::now(Cause::Unavailable(Store::JournalFailed)))?
            .clone();
        // The tenant's quota: one event, one charge, however many copies;
        // given back if the event is not taken (or was taken before).
        let quotas = p.charged.then_some(self.quotas.as_ref()).flatten();
        let charge = EventCharge::take(quotas, p.tenant.scope()).await?;
        let give_back = || charge.give_back();
        let passes = self.catalog.subscribed(&p.app, &p.kind, &p.json);
        // Each copy's bookkeeping beside the payload (held once).
        let overhead = JOB_OVERHEAD.saturating_mul(passes.len() as u64);
        let Some(extra) = self.budget.try_hold(overhead) else {
            give_back().await;
            return Err(Refusal::after(Cause::NoRoom, self.drain_wait_now()));
        };
        // A key is this application's, not an earlier one's of the name,
        // and its id is past the application's `since`.
        let since = self.catalog.since_of(&p.app);
        let seq = next_id_after(since);
        let record = EventRecord {
            app: p.app,
            kind: p.kind,
            created_ms: unix_ms(),
            tenant: p.tenant.named.clone(),
            key: p.key,
            copies: passes.iter().map(|pass| pass.name().to_string()).collect(),
        };
        match store
            .post(seq, record.clone(), p.payload.clone(), since)
            .await
        {
            Ok(crate::events::store::Posted::New) => {}
            Ok(crate::events::store::Posted::Duplicate { seq, copies }) => {
                give_back().await;
                metrics::counter!(EVENTS, "result" => "duplicate").increment(1);
                return Ok(EventTaken {
                    id: seq,
                    endpoints: copies,
                    duplicate: true,
                });
            }
            Ok(crate::events::store::Posted::Reused) => {
                give_back().await;
                return Err(Refusal::now(Cause::KeyReused));
            }
            Err(e) => {
                tracing::error!(error = %e, "an event could not be written: refused");
                give_back().await;
                return Err(Refusal::now(Cause::Unavailable(Store::JournalFailed)));
            }
        }
        let result = if passes.is_empty() {
            "no_endpoints"
        } else {
            "fanned_out"
        };
        metrics::counter!(EVENTS, "result" => result).increment(1);
        let held = Arc::new(crate::domain::budget::Ticket::merged(p.ticket, extra));
        let sender = Sender {
            set: self.set.clone(),
            catalog: self.catalog.clone(),
            sink: self.sink.clone(),
            store,
            retry_max: self.retry_max,
        };
        for pass in &passes {
            let job = sender.job(seq, &record, &p.payload, pass.name(), Some(held.clone()));
            sender.send_now(job, pass.name());
        }
        drop(passes);
        Ok(EventTaken {
            id: seq,
            endpoints: record.copies.len(),
            duplicate: false,
        })
    }

    async fn event(
        &self,
        app: &str,
        id: u64,
    ) -> Result<Option<(EventRecord, Vec<(String, CopyRecord)>)>, String> {
        Ok(self.store()?.event(id)?.filter(|(r, _)| r.app == app))
    }

    async fn payload(&self, _app: &str, id: u64) -> Result<Option<Vec<u8>>, String> {
        self.store()?.payload(id)
    }

    async fn list(
        &self,
        app: &str,
        kind: Option<&str>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, EventRecord)>, String> {
        self.store()?.events(app, kind, before, limit)
    }

    async fn copies(
        &self,
        app: &str,
        endpoint: &str,
        failed: Option<bool>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, String, CopyRecord)>, String> {
        self.store()?
            .copies_of(app, endpoint, failed, before, limit)
    }

    async fn resend(&self, _app: &str, id: u64, endpoint: &str) -> Result<(), SendAgain> {
        let store = self.store().map_err(SendAgain::Failed)?.clone();
        let (record, copies) = store
            .event(id)
            .map_err(SendAgain::Failed)?
            .ok_or(SendAgain::NotFound)?;
        let copy = copies
            .iter()
            .find(|(n, _)| n == endpoint)
            .ok_or(SendAgain::NotFound)?;
        if copy.1.state == CopyState::Pending {
            return Err(SendAgain::Pending);
        }
        let payload = store
            .payload(id)
            .map_err(SendAgain::Failed)?
            .unwrap_or_default();
        let endpoint: Arc<str> = Arc::from(endpoint);
        // Held open while it is marked and offered: a deletion waits.
        let Some(_pass) = self.catalog.open(&endpoint) else {
            return Err(SendAgain::Gone);
        };
        // Marked pending, durably, only if it has ended: of two resends
        // at once one sends it, the other is told it is on its way.
        let granted = store
            .again(vec![id], endpoint.clone())
            .await
            .map_err(SendAgain::Failed)?;
        if granted.is_empty() {
            return Err(SendAgain::Pending);
        }
        let sender = self.sender().map_err(SendAgain::Failed)?;
        let job = sender.job(id, &record, &payload.into(), &endpoint, None);
        sender.send_now(job, &endpoint);
        Ok(())
    }

    async fn recover(
        &self,
        app: &str,
        endpoint: &str,
        window: (u64, u64),
    ) -> Result<(usize, bool), SendAgain> {
        let store = self.store().map_err(SendAgain::Failed)?.clone();
        if !self.catalog.is_open(endpoint) {
            return Err(SendAgain::Gone);
        }
        let (dead, more) = store
            .dead_lettered(app, endpoint, window, MOST_RECOVERED)
            .map_err(SendAgain::Failed)?;
        let endpoint: Arc<str> = Arc::from(endpoint);
        // Marked pending first, durably and only those still ended (a
        // restart sends them if this one stops; two recovers at once send
        // each once), then sent as the endpoint's queue has room.
        let granted = store
            .again(dead, endpoint.clone())
            .await
            .map_err(SendAgain::Failed)?;
        let sent = granted.len();
        self.sender()
            .map_err(SendAgain::Failed)?
            .send_waiting(endpoint, granted);
        Ok((sent, more))
    }

    async fn put_app(
        &self,
        name: &str,
        app: App,
        pre: &Precondition,
    ) -> Result<(bool, App), ChangeRefused> {
        self.changes.put_app(&self.catalog, name, app, pre).await
    }

    async fn delete_app(&self, name: &str, pre: &Precondition) -> Result<usize, ChangeRefused> {
        // Its lock throughout: no endpoint of it is made meanwhile.
        let turn = self.changes.app_turn(name).await;
        let Some(now) = self.catalog.app(name) else {
            return Err(match pre.holds(None) {
                true => ChangeRefused::unknown_application(),
                false => ChangeRefused::precondition(),
            });
        };
        if !pre.holds(Some(&crate::catalog::edit::app_etag(&now))) {
            return Err(ChangeRefused::precondition());
        }
        let endpoints = self.catalog.endpoints_of(name);
        let mut deleted = 0;
        for endpoint in endpoints {
            match self
                .changes
                .delete(
                    &self.set,
                    &self.catalog,
                    &self.sink,
                    &endpoint,
                    &Precondition::default(),
                    "application-deleted",
                )
                .await
            {
                Ok(_) => deleted += 1,
                Err(e) if e.status == 404 => {}
                Err(e) => return Err(e),
            }
        }
        self.changes.delete_app(&self.catalog, name, turn).await?;
        Ok(deleted)
    }
}

/// A copy's recorded reason as the dead-letter file takes it (a known
/// reason; another, which no relay writes, as `failed`).
fn letter_reason(reason: &str) -> &'static str {
    const KNOWN: [&str; 13] = [
        "failed",
        "destination-unknown",
        "overflow",
        "expired",
        "shutdown",
        "evicted",
        "closed",
        "refused",
        "destination-deleted",
        "application-deleted",
        "abandoned",
        "undecodable",
        "rejected",
    ];
    KNOWN.into_iter().find(|k| *k == reason).unwrap_or("failed")
}
