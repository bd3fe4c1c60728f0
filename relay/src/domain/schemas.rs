//! The bodies the documents name that no handler type carries: the RFC
//! 9457 problem every refusal is, intake's 202, and the readiness answers.
//! (A webhook's status and the destinations are their handlers' own types.)

#![allow(dead_code)] // Described, not built: the handlers write these themselves (`json!`, `accepted_202`).

use serde::Serialize;
use utoipa::ToSchema;

/// An RFC 9457 problem (`application/problem+json`): every refusal.
#[derive(Serialize, ToSchema)]
pub struct Problem {
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
pub struct Accepted {
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
pub struct Ready {
    /// `ready`.
    #[schema(example = "ready")]
    pub status: String,
}

/// One thing that is down.
#[derive(Serialize, ToSchema)]
pub struct Down {
    /// `journal`, `dead-letter`, `redis` or `postgres`.
    pub name: String,
    /// Why.
    pub detail: String,
}

/// `GET /readyz`: not ready, a problem naming what is down.
#[derive(Serialize, ToSchema)]
pub struct NotReady {
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
