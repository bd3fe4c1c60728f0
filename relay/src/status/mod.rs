//! Webhook status by id: what `GET /v1/webhooks/{id}` answers.
//!
//! The [`Registry`] follows every webhook the set holds, by the events it
//! is told: intake's admission (queued), a delivery starting (in flight,
//! from the destination's downstream, which also reports the receiver's
//! status), and the drain's own [`DrainHook`] events through the set's
//! `drain_hook` (attempt ended, retry scheduled with its delay, job ended
//! with its outcome). Held webhooks are always known (bounded by the
//! set's own bound on jobs); ended ones are remembered for
//! `status_retention` within `status_max` of them ([`ended`]).
//!
//! With a journal, ended statuses are also written beside it ([`file`](mod@file))
//! and read back at start, so a restart remembers them. Webhooks still
//! unfinished are recovered from the journal and known again from the
//! start, before their first attempt (through the set's `on_recovered`).
//!
//! A webhook is known by its public id (the one its 202 named and its
//! receiver sees); a redriven webhook keeps its earlier public id while the
//! set gives it a new one, so the registry maps one to the other.

pub(crate) mod ended;
pub(crate) mod file;
pub(crate) mod record;
pub(crate) mod unowned;
pub(crate) mod view;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use dripfeed::{Attempt, AttemptEnd, DrainHook, Outcome};

use crate::domain::job::unix_ms;
use ended::{ENTRY_BYTES, EndedSet};
use record::{Names, Rec};

/// Where a webhook is: `queued`, `in_flight`, `retry_waiting` (see
/// `next_attempt_at`), `delivered` or `dead_lettered`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    /// Admitted, waiting for its first attempt.
    #[default]
    Queued,
    /// An attempt is running.
    InFlight,
    /// An attempt failed; the next one is scheduled.
    RetryWaiting,
    /// A receiver took it (2xx).
    Delivered,
    /// Written to the dead-letter file (failed for good, evicted, expired).
    DeadLettered,
}

/// What is known of one webhook, as the routes show it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Status {
    /// Its state.
    pub state: State,
    /// The tenant that sent it (`None` on an open relay, or when its tenant
    /// is no longer configured: then only the admin token sees it).
    pub tenant: Option<Arc<str>>,
    /// The destination it goes to.
    pub destination: Option<Arc<str>>,
    /// Attempts made so far.
    pub attempts: u32,
    /// The receiver's last HTTP status (`None`: no answer yet, or none).
    pub last_status: Option<u16>,
    /// Its last failed attempt's error (`kind: message`).
    pub last_error: Option<Arc<str>>,
    /// When the next attempt is due, ms since the Unix epoch.
    pub next_attempt_unix_ms: Option<u64>,
    /// When the relay received it, ms since the Unix epoch.
    pub received_unix_ms: Option<u64>,
}

/// What the registry holds.
struct Books {
    /// Held webhooks, by the set's job id.
    held: HashMap<u64, Rec>,
    /// Public id → the set's id, for held webhooks whose ids differ.
    aliases: HashMap<u64, u64>,
    /// Ended webhooks, by public id.
    ended: EndedSet,
    /// Jobs that ended with no record, for intake to own.
    unowned: unowned::Unowned,
    /// The names records point at.
    names: Names,
}

/// See the [module](self) docs.
pub(crate) struct Registry {
    books: Mutex<Books>,
    /// Where ended statuses are written, once [`attach`](Self::attach)ed.
    persist: OnceLock<file::Inbox>,
    /// The writer thread, joined by [`finish`](Self::finish).
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Ends not written: the writer's backlog was full.
    unwritten: AtomicU64,
}

/// A status found by id, and when it ended (if it did).
pub(crate) struct Found {
    /// What is known.
    pub status: Status,
    /// When it ended, ms since the Unix epoch.
    pub ended_unix_ms: Option<u64>,
}

impl Registry {
    /// A registry remembering ended webhooks for `retention`, at most
    /// `max`; `tenants` are the configured tenants' names.
    pub(crate) fn new<'a>(
        retention: Duration,
        max: usize,
        tenants: impl IntoIterator<Item = &'a str>,
    ) -> Registry {
        Registry {
            books: Mutex::new(Books {
                held: HashMap::new(),
                aliases: HashMap::new(),
                ended: EndedSet::new(retention, max),
                unowned: unowned::Unowned::default(),
                names: Names::new(tenants),
            }),
            persist: OnceLock::new(),
            writer: Mutex::new(None),
            unwritten: AtomicU64::new(0),
        }
    }

    /// Reads the ended statuses kept in `dir` (the journal directory) and
    /// writes every later end there: how many were read back, and how many
    /// lines did not read.
    pub(crate) fn attach(
        &self,
        dir: &std::path::Path,
        max: usize,
    ) -> std::io::Result<(usize, usize)> {
        if max == 0 {
            return Ok((0, 0)); // nothing ended is remembered
        }
        let bad = {
            let mut guard = self.books();
            let books = &mut *guard;
            let bad = file::load(dir, |(id, status, ended)| {
                // A line with no destination is an event's copy an earlier
                // version wrote: not a webhook's status.
                if status.destination.is_some() {
                    let rec = books.names.record(&status);
                    books.ended.insert(id, rec, ended);
                }
            });
            books.ended.forget_expired(unix_ms());
            bad
        };
        let (tx, thread) = file::writer(dir, max)?;
        let _ = self.persist.set(tx);
        *self.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok((self.books().ended.len(), bad))
    }

    /// At shutdown, once the set has drained: every end written, the
    /// writer ended. Returns how many ends could not be written (its
    /// backlog was full).
    pub(crate) async fn finish(&self) -> u64 {
        let thread = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(tx), Some(thread)) = (self.persist.get().cloned(), thread) {
            let _ = tokio::task::spawn_blocking(move || {
                tx.close(); // after every line offered before it
                thread.join()
            })
            .await;
        }
        self.unwritten.load(Ordering::Relaxed)
    }

    /// Writes an end, when attached.
    fn persist(&self, names: &Names, id: u64, rec: &Rec, ended: u64) {
        if let Some(tx) = self.persist.get() {
            let line = file::Line::of(id, &names.status(rec), ended);
            if !tx.offer(line) && self.unwritten.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "webhook statuses are ending faster than their file takes them: some will be forgotten at the next start"
                );
            }
        }
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Intake admitted webhook `id` for `tenant`, to `destination`.
    pub(crate) fn queued(
        &self,
        id: u64,
        tenant: Option<&str>,
        destination: &Arc<str>,
        received: u64,
    ) {
        let mut guard = self.books();
        let books = &mut *guard;
        let tenant = books.names.tenant(tenant);
        let destination = books.names.destination(destination);
        if let Some((mut rec, ended)) = books.unowned.take(id) {
            // It ended, with no attempt, before intake got here: named
            // now, and kept.
            own(&mut rec, tenant, destination, received);
            self.persist(&books.names, id, &rec, ended);
            books.ended.insert(id, rec, ended);
            return;
        }
        if let Some(e) = books.ended.get_mut(id) {
            // Its delivery (its first attempt named it) ended before intake
            // got here: whatever it did not know is filled in.
            if own(&mut e.rec, tenant, destination, received) {
                let (rec, at) = (e.rec, e.ended_unix_ms);
                self.persist(&books.names, id, &rec, at);
            }
            return;
        }
        let r = books.held.entry(id).or_default();
        let _ = own(r, tenant, destination, received);
    }

    /// The set's job `id` (public id `public`) was recovered from the
    /// journal for `destination`: known, queued, before its first attempt.
    pub(crate) fn recovered(
        &self,
        id: u64,
        public: u64,
        tenant: Option<&str>,
        destination: &str,
        received: u64,
    ) {
        self.books().hold(id, public, tenant, destination, received);
    }

    /// Attempt `attempt` of the set's job (public id `public`) starts,
    /// to `destination`.
    pub(crate) fn started(
        &self,
        attempt: Attempt,
        public: u64,
        tenant: Option<&str>,
        destination: &Arc<str>,
        received: u64,
    ) {
        let mut books = self.books();
        let r = books.hold(attempt.id(), public, tenant, destination, received);
        r.state = State::InFlight;
        r.next_attempt_ms = 0;
    }

    /// The receiver answered the running attempt of job `id` with `status`.
    pub(crate) fn answered(&self, id: u64, status: u16) {
        if let Some(r) = self.books().held.get_mut(&id) {
            r.last_status = status;
        }
    }

    /// Tenants a reload added: their webhooks' statuses are theirs.
    pub(crate) fn add_tenants<'a>(&self, tenants: impl IntoIterator<Item = &'a str>) {
        self.books().names.add_tenants(tenants);
    }

    /// The running attempt of job `id` failed with `error` (`kind:
    /// message`, its kind `kind`).
    pub(crate) fn failed(&self, id: u64, kind: &str, error: &str) {
        let mut guard = self.books();
        let books = &mut *guard;
        if let Some(r) = books.held.get_mut(&id) {
            r.error = books.names.error(kind, error);
        }
    }

    /// The status of webhook `public` (a public id) at `now`.
    pub(crate) fn find(&self, public: u64, now: u64) -> Option<Found> {
        let mut guard = self.books();
        let books = &mut *guard;
        let id = books.aliases.get(&public).copied().unwrap_or(public);
        if let Some(r) = books.held.get(&id) {
            let its = if r.public == 0 { id } else { r.public };
            if its == public {
                return Some(Found {
                    status: books.names.status(r),
                    ended_unix_ms: None,
                });
            }
        }
        let e = books.ended.get(public, now)?;
        Some(Found {
            status: books.names.status(&e.rec),
            ended_unix_ms: Some(e.ended_unix_ms),
        })
    }

    /// Webhooks followed (held, ended) and the bytes their tables take.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let books = self.books();
        (books.held.len(), books.ended.len())
    }

    /// The bytes the statuses' tables take (entries allocated, whether
    /// full or not), roughly.
    pub(crate) fn bytes(&self) -> usize {
        let books = self.books();
        let held = books.held.capacity() * (std::mem::size_of::<(u64, Rec)>() + 1);
        held + (books.ended.len() + books.unowned.len()) * ENTRY_BYTES
    }
}

impl Books {
    /// The held record of the set's job `id` (public id `public`), made if
    /// new, with what it did not know yet filled in.
    fn hold(
        &mut self,
        id: u64,
        public: u64,
        tenant: Option<&str>,
        destination: &str,
        received: u64,
    ) -> &mut Rec {
        let tenant = self.names.tenant(tenant);
        let destination = self.names.destination(destination);
        if public != id {
            self.aliases.insert(public, id);
        }
        let r = self.held.entry(id).or_default();
        let _ = own(r, tenant, destination, received);
        if public != id {
            r.public = public;
        }
        r
    }
}

/// Fills what a record does not know yet: whether it knew less.
fn own(r: &mut Rec, tenant: u16, destination: u32, received: u64) -> bool {
    let before = (r.tenant, r.destination, r.received_ms);
    if r.tenant == 0 {
        r.tenant = tenant;
    }
    if r.destination == 0 {
        r.destination = destination;
    }
    if r.received_ms == 0 {
        r.received_ms = received;
    }
    before != (r.tenant, r.destination, r.received_ms)
}

impl DrainHook for Registry {
    fn attempt_ended(&self, attempt: Attempt, _end: AttemptEnd) {
        if let Some(r) = self.books().held.get_mut(&attempt.id()) {
            r.attempts = r.attempts.max(attempt.number());
        }
    }

    fn retry_scheduled(&self, next: Attempt, after: Duration) {
        let at = unix_ms().saturating_add(u64::try_from(after.as_millis()).unwrap_or(u64::MAX));
        // A webhook's (an event's copy has no record here).
        if let Some(r) = self.books().held.get_mut(&next.id()) {
            r.state = State::RetryWaiting;
            r.next_attempt_ms = at.max(1);
            // Those before it (a webhook recovered at a start is told
            // here, its attempts made before the stop).
            r.attempts = r.attempts.max(next.number().saturating_sub(1));
        }
    }

    fn job_ended(&self, id: u64, outcome: Outcome) {
        let mut guard = self.books();
        let books = &mut *guard;
        let held = books.held.remove(&id);
        let was_held = held.is_some();
        let mut rec = held.unwrap_or_default();
        let public = match rec.public {
            0 => id,
            p => p,
        };
        if public != id {
            books.aliases.remove(&public);
        }
        rec.public = 0;
        rec.next_attempt_ms = 0;
        rec.state = match outcome {
            Outcome::Delivered => State::Delivered,
            // Unfinished at shutdown: the next start delivers it.
            Outcome::Kept | Outcome::Returned | Outcome::Refused => return,
            _ => State::DeadLettered,
        };
        let now = unix_ms();
        if !was_held {
            books.unowned.insert(id, rec, now);
            return;
        }
        self.persist(&books.names, public, &rec, now);
        books.ended.insert(public, rec, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry::new(Duration::from_secs(60), 10, ["acme"])
    }

    #[test]
    fn a_webhook_is_followed_to_its_end() {
        let r = registry();
        let dest: Arc<str> = Arc::from("billing");
        r.queued(7, Some("acme"), &dest, 1);
        let s = r.find(7, 2).unwrap().status;
        assert_eq!(
            (s.state, s.tenant.as_deref()),
            (State::Queued, Some("acme"))
        );
        r.started(Attempt::new(7, 1), 7, Some("acme"), &dest, 1);
        r.answered(7, 500);
        r.attempt_ended(Attempt::new(7, 1), AttemptEnd::TimedOut);
        r.retry_scheduled(Attempt::new(7, 2), Duration::from_secs(5));
        let s = r.find(7, 2).unwrap().status;
        assert_eq!(s.state, State::RetryWaiting);
        assert_eq!((s.attempts, s.last_status), (1, Some(500)));
        assert!(s.next_attempt_unix_ms.is_some());
        r.job_ended(7, Outcome::DeadLettered);
        let f = r.find(7, unix_ms()).unwrap();
        assert_eq!(f.status.state, State::DeadLettered);
        assert!(f.ended_unix_ms.is_some());
        assert_eq!(r.counts().0, 0);
    }

    #[test]
    fn held_statuses_cost_their_table_and_little_else() {
        let r = registry();
        let dest: Arc<str> = Arc::from("billing");
        for id in 1..=1000 {
            r.queued(id, Some("acme"), &dest, 1);
        }
        // 48-byte entries in a table at most twice as large as needed.
        assert!(r.bytes() <= 2 * 1000 * 49 + 2048, "{}", r.bytes());
        assert_eq!(
            r.find(500, 2).unwrap().status.tenant.as_deref(),
            Some("acme")
        );
    }

    #[test]
    fn an_end_before_intake_names_it_still_gets_its_owner() {
        let r = registry();
        r.job_ended(9, Outcome::Delivered);
        r.queued(9, Some("acme"), &Arc::from("billing"), 1);
        let s = r.find(9, unix_ms()).unwrap().status;
        assert_eq!(s.tenant.as_deref(), Some("acme"));
        assert_eq!(s.state, State::Delivered);
        assert_eq!(r.counts().0, 0, "no held entry left behind");
        // Delivered, its attempt started, before intake named it.
        let dest: Arc<str> = Arc::from("billing");
        r.started(Attempt::new(12, 1), 12, None, &dest, 1);
        r.job_ended(12, Outcome::Delivered);
        r.queued(12, Some("acme"), &dest, 1);
        let s = r.find(12, unix_ms()).unwrap().status;
        assert_eq!(
            (s.state, s.tenant.as_deref()),
            (State::Delivered, Some("acme"))
        );
        assert_eq!(r.counts().0, 0, "no held entry left behind");
    }

    #[test]
    fn an_events_copy_is_no_webhook_status() {
        let r = registry();
        // A copy: retried and ended, never named by intake.
        r.retry_scheduled(Attempt::new(11, 2), Duration::from_secs(1));
        r.job_ended(11, Outcome::Delivered);
        assert!(r.find(11, unix_ms()).is_none(), "not a webhook");
        assert_eq!(r.counts(), (0, 0), "nothing held, nothing ended");
    }

    #[test]
    fn a_redriven_webhook_is_found_by_its_earlier_id() {
        let r = registry();
        r.started(Attempt::new(100, 1), 5, None, &Arc::from("b"), 1);
        assert!(r.find(5, 2).is_some());
        assert!(r.find(100, 2).is_none());
        r.job_ended(100, Outcome::Delivered);
        assert_eq!(r.find(5, unix_ms()).unwrap().status.state, State::Delivered);
    }

    #[test]
    fn an_unknown_tenant_name_is_no_owner() {
        let r = registry();
        r.queued(1, Some("someone"), &Arc::from("b"), 1);
        assert!(r.find(1, 2).unwrap().status.tenant.is_none());
    }
}
