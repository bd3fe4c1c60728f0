//! The events part of the queue contract: posting an event (fanned out to
//! its application's subscribed endpoints in one admission), reading
//! events and attempts back, sending a copy again, and the applications.
//! Each engine keeps these rules:
//!
//! - an event is durable before its 202 with every copy it fans out to:
//!   the local engine writes the copies in the same write, the fleet's
//!   writes the list of them and queues them afterwards (any relay
//!   finishing what one that died left). A crash never leaves half a
//!   fan-out, and a retried post with the same `Idempotency-Key` (scoped
//!   by application) never fans out twice;
//! - one slow or full endpoint never refuses or delays the event for the
//!   others: a copy its endpoint's queue does not take follows that
//!   endpoint's overflow policy, and one not queued is dead-lettered with
//!   its reason (`overflow`), counted and recoverable;
//! - a copy goes through its endpoint's bucket like any webhook, signed
//!   with its endpoint's secret, `webhook-id` the event's id on every copy
//!   and attempt, its type in `webhook-event-type`.

use axum::body::Bytes;

use super::refusal::{ChangeRefused, Refusal};
use crate::catalog::App;
use crate::catalog::edit::Precondition;
use crate::domain::budget::Ticket;
use crate::domain::names::Tenant;
use crate::events::read::Page;
use crate::events::record::{CopyRecord, EventRecord};

/// An event offered: its request checked and its payload read.
pub(crate) struct EventPost {
    /// Its application (it exists).
    pub app: String,
    /// Its type (checked).
    pub kind: String,
    /// Its payload, as posted (JSON).
    pub payload: Bytes,
    /// The same, read (for the endpoints' filters).
    pub json: serde_json::Value,
    /// Its tenant.
    pub tenant: Tenant,
    /// Whether its tenant's quota applies.
    pub charged: bool,
    /// Its `Idempotency-Key`, if any, scoped by its tenant
    /// ([`scoped_key`](crate::domain::names::scoped_key)): the same key from
    /// two tenants is two events, as it is two webhooks.
    pub key: Option<String>,
    /// Its bytes in the budget.
    pub ticket: Ticket,
}

/// An event taken: its id, and how many endpoints it went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventTaken {
    /// Its id.
    pub id: u64,
    /// The endpoints it went to (queued, or dead-lettered for overflow).
    pub endpoints: usize,
    /// A repeat of an `Idempotency-Key` taken before: nothing new.
    pub duplicate: bool,
}

/// The most copies one `recover` sends again (the caller asks again for
/// the rest).
pub(crate) const MOST_RECOVERED: usize = 10_000;

/// Why a copy could not be sent again.
#[derive(Debug)]
pub(crate) enum SendAgain {
    /// No such event, or it has no copy for that endpoint.
    NotFound,
    /// The endpoint no longer exists (or is being deleted).
    Gone,
    /// Still on its way: it has not ended yet.
    Pending,
    /// The store cannot be read or written.
    Failed(String),
}

/// The events part of a queue (see the [module](self) docs).
#[async_trait::async_trait]
pub(crate) trait Events: Send + Sync {
    /// Takes an event in, fanned out to every endpoint of its application
    /// subscribed to its type (whose filter its payload passes).
    async fn post(&self, post: EventPost) -> Result<EventTaken, Refusal>;

    /// Event `id` of application `app` (another's: `None`), with each
    /// copy.
    async fn event(
        &self,
        app: &str,
        id: u64,
    ) -> Result<Option<(EventRecord, Vec<(String, CopyRecord)>)>, String>;

    /// Event `id`'s payload (of application `app`).
    async fn payload(&self, app: &str, id: u64) -> Result<Option<Vec<u8>>, String>;

    /// `app`'s events newest first.
    async fn list(
        &self,
        app: &str,
        kind: Option<&str>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, EventRecord)>, String>;

    /// `endpoint`'s copies newest first (`failed`: only the failed, or
    /// only the delivered).
    async fn copies(
        &self,
        app: &str,
        endpoint: &str,
        failed: Option<bool>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, String, CopyRecord)>, String>;

    /// Sends event `id` to `endpoint` again (delivered or not, once it has
    /// ended).
    async fn resend(&self, app: &str, id: u64, endpoint: &str) -> Result<(), SendAgain>;

    /// Sends `endpoint`'s dead-lettered copies of application `app`'s
    /// events from `from` to `to` (ids) again, at most [`MOST_RECOVERED`]:
    /// how many, and whether more are left in the window.
    async fn recover(
        &self,
        app: &str,
        endpoint: &str,
        window: (u64, u64),
    ) -> Result<(usize, bool), SendAgain>;

    /// The `since` of application `app` if it is made now
    /// ([`App::since`]): one past the newest event kept under its name (a
    /// deleted application's), 0 if none (a relay's clock is not trusted
    /// across a fleet); when the events cannot be read, now.
    async fn fresh_since(&self, app: &str) -> u64 {
        match self.list(app, None, None, 1).await {
            Ok(page) => page.items.first().map_or(0, |(id, _)| id.saturating_add(1)),
            Err(_) => crate::events::id::next_id(),
        }
    }

    /// Makes or replaces application `name` if `pre` holds for it as it
    /// is: whether it is new, and it as kept.
    async fn put_app(
        &self,
        name: &str,
        app: App,
        pre: &Precondition,
    ) -> Result<(bool, App), ChangeRefused>;

    /// Deletes application `name` (if `pre` holds for it) and every
    /// endpoint of it (each drained as a deleted destination is): how many
    /// endpoints.
    async fn delete_app(&self, name: &str, pre: &Precondition) -> Result<usize, ChangeRefused>;
}
