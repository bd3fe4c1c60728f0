//! The queue contract: what intake, the admin API and serve need from a
//! queue, whichever engine keeps it ([`super::local`]: the journal and the
//! destinations set; `super::fleet`: Redis Streams shared by a fleet).
//! A rule of the contract lives in the engines behind this trait, never in
//! a branch of intake or admin; the conformance suite
//! (`relay/tests/it/contract/`) runs every rule against both.
//!
//! The rules:
//! - an `Idempotency-Key` is scoped by tenant, encoded so that no tenant
//!   and key collide with another pair, and names one request: its
//!   destination and its body. The same request again answers the first
//!   id; another body or destination is [`Cause::KeyReused`] (422), and
//!   nothing is queued;
//! - refusals, overflow, deliveries, dead letters and retries are counted
//!   under the library's series names in both engines, each relay counting
//!   what it did (so a sum over a fleet counts each webhook once); a
//!   fleet's shared depth has a series of its own, read with `max()`;
//! - every `Retry-After` is spread by the library's rule
//!   ([`dripfeed::headers::spread_seconds`]);
//! - a destination's view shows its counts (a fleet's, in fleet mode), and
//!   a configured one its capacity and rate from the start, busy or idle;
//! - a dead letter goes back only to the destination it came from, once,
//!   whichever way it is redriven.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::edit::{Edit, Precondition};
use crate::catalog::vet::Vetter;
use crate::config::{Destination, Fields};
use crate::dead_letter::health::Unavailable;
use crate::dead_letter::page::DeadLetter;
use crate::domain::job::Job;
use crate::domain::names::Tenant;
use crate::domain::schemas::{Deleting, Live};
use crate::status::Found;

/// One webhook offered for admission, its request checked and its body read.
pub(crate) struct Admission {
    /// The destination it names (open when intake picked it).
    pub destination: Arc<str>,
    /// Its tenant: whose quota it is charged to and whose keys it uses.
    pub tenant: Tenant,
    /// Its `Idempotency-Key`, if it gave one.
    pub key: Option<String>,
    /// Whether its tenant's quota applies.
    pub charged: bool,
    /// The webhook.
    pub job: Job,
}

/// A webhook taken: the 202's `status` and `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// Queued for delivery.
    Queued(u64),
    /// Admitted to start later (overflow `dead-letter`: in the dead-letter
    /// file already).
    Deferred(u64),
    /// The same request was admitted before: its id; nothing new queued.
    Duplicate(u64),
}

impl Accepted {
    /// The webhook's id.
    pub(crate) fn id(self) -> u64 {
        match self {
            Accepted::Queued(id) | Accepted::Deferred(id) | Accepted::Duplicate(id) => id,
        }
    }
}

pub(crate) use super::refusal::{Cause, ChangeRefused, Changed, Put, Refusal, Store};

/// What `GET /v1/dead-letters` asks for.
#[derive(Debug, Clone)]
pub(crate) struct LetterQuery {
    /// Only this destination's letters.
    pub destination: Option<String>,
    /// Where to start: a cursor a page gave.
    pub cursor: Option<String>,
    /// Letters in the page at most.
    pub limit: usize,
}

/// A page of dead letters.
#[derive(Debug, Default)]
pub(crate) struct LetterPage {
    /// The letters, oldest first.
    pub lines: Vec<DeadLetter>,
    /// Where the next page starts.
    pub next: Option<String>,
    /// Whether the page stopped at its limit.
    pub more: bool,
}

/// Why dead letters could not be read or redriven.
#[derive(Debug, Clone)]
pub(crate) enum LetterError {
    /// 422: a cursor this relay did not give.
    BadCursor,
    /// 503: the store holding them cannot be read or written.
    Unreadable(String),
}

/// Which dead letters to redrive.
#[derive(Debug, Clone)]
pub(crate) enum Redrive {
    /// Those with these ids.
    Ids(HashSet<String>),
    /// Every one of this destination.
    Destination(String),
}

/// What a redrive did.
#[derive(Debug, Default)]
pub(crate) struct Redriven {
    /// Letters admitted again (and marked: never redriven twice).
    pub readmitted: u64,
    /// Letters of event copies sent again since (a recover, a resend):
    /// marked, nothing sent.
    pub settled: u64,
    /// Letters refused for now (a full queue or byte budget): left to
    /// redrive later.
    pub refused: u64,
    /// Whether more letters of the request remain: ask again.
    pub more: bool,
    /// Letters of the request that stay where they are, each with why (the
    /// destination they came from is gone, or they do not read).
    pub kept: Vec<Kept>,
}

/// A dead letter a redrive left where it is.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Kept {
    /// Its id (absent on a letter without one).
    pub id: Option<String>,
    /// The destination it came from (absent on a letter without one).
    pub destination: Option<String>,
    /// `destination-gone` (it goes back only where it came from) or
    /// `unreadable`.
    pub reason: &'static str,
}

/// What a shutdown left.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Drained {
    /// Webhooks this relay delivered over its life.
    pub delivered: u64,
    /// Left in the journal for the next start (local engine).
    pub kept: u64,
    /// Dead-letter lines written in this run (local engine).
    pub dead_letter_lines: u64,
    /// Dead-letter lines that could not be written (a full disk, …).
    pub dead_letter_held: usize,
    /// Webhook statuses not written beside the journal.
    pub statuses_unwritten: u64,
}

/// A queue: see the [module](self) docs for the rules every engine keeps.
#[async_trait::async_trait]
pub(crate) trait Queue: Send + Sync + 'static {
    /// Why a webhook taken now could not be kept (a dead letter could not
    /// be written), or `None`: asked before a body is read.
    fn not_keeping(&self) -> Option<Unavailable>;

    /// How long until the queues have room again, roughly: the
    /// `Retry-After` for a byte budget with no room.
    fn drain_wait(&self) -> Duration;

    /// Forgets the oldest idempotency keys the relay holds in its byte
    /// budget until `bytes` more fit (the fleet's are in Redis: none).
    fn make_room(&self, bytes: u64);

    /// Takes a webhook in: its tenant's quota, its idempotency key, the
    /// destination's bound, durability; a refused webhook's bytes are
    /// given back when the job is dropped.
    async fn admit(&self, admission: Admission) -> Result<Accepted, Refusal>;

    /// Webhook `id`'s status, or `None` when unknown; `Err` when the store
    /// holding statuses cannot be read.
    async fn status(&self, id: u64) -> Result<Option<Found>, String>;

    /// A destination's live state: its depth, capacity, rate and counts
    /// (the fleet's, in fleet mode); `None` for a name it does not know.
    async fn live(&self, name: &str) -> Option<Live>;

    /// The (at most) `k` destinations holding the most webhooks here,
    /// most first, with how many (the fleet's: what this relay claimed).
    fn busiest(&self, k: usize) -> Vec<(String, u64)>;

    /// Destination `name`'s fields as the engine keeps them now (the
    /// fleet's, read from Redis, in fleet mode), for its `ETag`; `None`
    /// when it does not exist (or is being deleted).
    async fn current(&self, name: &str) -> Result<Option<Fields>, ChangeRefused>;

    /// Makes or changes destination `name` by `edit`, from the admin API,
    /// linearizably: the edit is resolved against the value the engine
    /// holds at the moment it writes (under its lock, or against the
    /// value its compare-and-set checks), under `pre`, and checked by
    /// `vet` within the limits the engine imposes (as the configuration is checked at start). A destination deleted
    /// meanwhile is never made again by a `PATCH`.
    async fn change(
        &self,
        name: &str,
        edit: Edit,
        pre: &Precondition,
        vet: &Vetter,
    ) -> Result<Changed, ChangeRefused>;

    /// Deletes destination `name` (if `pre` holds): closed to new webhooks
    /// at once, what it holds delivered within the shutdown grace, then
    /// dead-lettered.
    async fn delete(&self, name: &str, pre: &Precondition) -> Result<Deleting, ChangeRefused>;

    /// The configured destinations a reload (SIGHUP) changes, all or
    /// none: each `Some` made or replaced as configured (checked, within
    /// the engine's limits), each `None` no longer configured: closed to
    /// new webhooks, what it holds delivered within the shutdown grace,
    /// then dead-lettered (the local engine) or left to the relays that
    /// still have it (the fleet's). Every change is checked before any is
    /// applied; a refusal changes nothing and names the destination.
    /// Applied on this relay only and written nowhere, as a restart with
    /// the new configuration would: a name the admin API changed is not
    /// touched (returned, for the log).
    async fn reconfigure(
        &self,
        changes: Vec<(String, Option<Destination>)>,
    ) -> Result<Vec<String>, ChangeRefused>;

    /// A page of dead letters.
    async fn dead_letters(&self, query: LetterQuery) -> Result<LetterPage, LetterError>;

    /// Redrives up to `most` dead letters, each to the destination it came
    /// from and under its id, once.
    async fn redrive(&self, what: Redrive, most: usize) -> Result<Redriven, LetterError>;

    /// What is down, each with why (`/readyz`): empty while a webhook
    /// taken now can be kept.
    async fn down(&self) -> Vec<(&'static str, String)>;

    /// Publishes the engine's own gauges, before `/metrics` is rendered.
    async fn publish(&self);

    /// Its events: posting, history, sending again, applications.
    fn events(&self) -> &dyn super::events::Events;

    /// Stops taking webhooks, delivers what it holds for up to `grace`,
    /// keeps or dead-letters the rest, and says what it left.
    async fn shutdown(&self, grace: Duration) -> Drained;
}
