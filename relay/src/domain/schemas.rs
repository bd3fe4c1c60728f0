//! The bodies the documents name that more than one part builds or no
//! handler type carries: the RFC 9457 problem every refusal is, intake's
//! 202, the readiness answers, a destination's live state and a deletion's
//! answer (the queue engines make those). A webhook's status and the
//! destinations' listing are their handlers' own types.

// Some are described, not built: the handlers write them themselves
// (`json!`, `accepted_202`).
#![allow(dead_code)]

use serde::Serialize;
use utoipa::ToSchema;

/// An RFC 9457 problem (`application/problem+json`): every refusal.
#[derive(Serialize, ToSchema)]
pub(crate) struct Problem {
    /// `urn:dripfeed:problem:KIND`, e.g. `urn:dripfeed:problem:over-quota`.
    #[schema(example = "urn:dripfeed:problem:overloaded")]
    pub r#type: String,
    /// The status's reason phrase.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened, naming nothing the caller does not own.
    pub detail: String,
    /// Seconds to wait before trying again, as `Retry-After` says (when it
    /// is sent).
    pub retry_after: Option<u64>,
}

/// `202 Accepted`: the webhook is queued (durable, with the journal).
#[derive(Serialize, ToSchema)]
pub(crate) struct Accepted {
    /// `queued`, `deferred` (admitted to start later), or `duplicate` (an
    /// `Idempotency-Key` already accepted: nothing new was queued).
    #[schema(example = "queued")]
    pub status: String,
    /// The webhook's id: its receiver sees it as `idempotency-key` (and
    /// `webhook-id` when signed); `GET /v1/webhooks/{id}` looks it up.
    #[schema(example = "1763998212345678901")]
    pub id: String,
}

/// `GET /readyz`: ready.
#[derive(Serialize, ToSchema)]
pub(crate) struct Ready {
    /// `ready`.
    #[schema(example = "ready")]
    pub status: String,
}

/// One thing that is down.
#[derive(Serialize, ToSchema)]
pub(crate) struct Down {
    /// `journal`, `dead-letter`, `redis` or `postgres`.
    pub name: String,
    /// Why.
    pub detail: String,
}

/// `GET /readyz`: not ready, a problem naming what is down.
#[derive(Serialize, ToSchema)]
pub(crate) struct NotReady {
    /// `urn:dripfeed:problem:not-ready`.
    pub r#type: String,
    /// `Service Unavailable`.
    pub title: String,
    /// 503.
    pub status: u16,
    /// What is down, in words.
    pub detail: String,
    /// Each thing down.
    pub down: Vec<Down>,
}

/// A destination's live state: with the local engine this relay's queue,
/// with `queue = redis` the fleet's (its depth, bound and counts are every
/// relay's together).
#[derive(Serialize, ToSchema, Debug, Clone, Default)]
pub(crate) struct Live {
    /// Whether its throttle runs now (with `queue = redis`: this relay's drain).
    pub active: bool,
    /// Its drain rate now, webhooks/s; while idle, the rate it would start at.
    pub rate_now: f64,
    /// Webhooks queued.
    pub depth: u64,
    /// Webhooks it may queue (budget × rate), busy or idle.
    pub capacity: u64,
    /// Deliveries running (on this relay).
    pub in_flight: u64,
    /// Webhooks held: queued, waiting for a retry or in flight.
    pub held: u64,
    /// `closed`, `open` or `half-open` (with `queue = redis`: `closed`).
    pub breaker: String,
    /// Webhooks admitted (an endpoint's event copies among them).
    pub accepted: u64,
    /// Webhooks refused: their senders were answered 429 or 503. An
    /// endpoint's event copies its full queue refused are among them, each
    /// dead-lettered with reason `overflow` (in the dead letters, not in
    /// `dead_lettered`).
    pub refused: u64,
    /// Webhooks delivered.
    pub delivered: u64,
    /// Webhooks dead-lettered once admitted (evicted ones among them).
    pub dead_lettered: u64,
}

/// What a `DELETE` left to drain.
#[derive(Serialize, ToSchema, Debug, Clone)]
pub(crate) struct Deleting {
    /// The destination.
    pub name: String,
    /// Webhooks it held when deleted (with `queue = redis`: the fleet's
    /// queue for it): delivered within `grace_ms`, then dead-lettered.
    pub held: u64,
    /// The time it has to deliver them, ms (the shutdown grace).
    pub grace_ms: u64,
}
