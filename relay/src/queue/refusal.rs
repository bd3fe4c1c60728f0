//! What a queue answers when it does not take a webhook or a change:
//! why ([`Cause`], and which [`Store`] failed), when to try again, and a
//! destination change made ([`Changed`], [`Put`]) or refused
//! ([`ChangeRefused`]). The contract ([`super::contract`]) and the events
//! part of a queue ([`super::events`]) both answer with these.

use std::time::Duration;

use crate::catalog::edit::EditError;
use crate::catalog::vet::Unfit;

/// Why a webhook was not taken, and the header fields that say when to
/// try again (`Retry-After`, and `RateLimit` for a full queue or a quota).
#[derive(Debug)]
pub(crate) struct Refusal {
    /// Why.
    pub cause: Cause,
    /// Header fields for the answer.
    pub fields: Vec<(&'static str, String)>,
}

impl Refusal {
    /// A refusal for `cause` with a `Retry-After` of `wait`, spread by the
    /// library's rule.
    pub(crate) fn after(cause: Cause, wait: Duration) -> Refusal {
        let secs = dripfeed::headers::spread_seconds(wait);
        Refusal {
            cause,
            fields: vec![("retry-after", secs.to_string())],
        }
    }

    /// A tenant over its quota (`over`): 429 with `Retry-After` and the
    /// key's `RateLimit` fields, as the library's keyed refusal has them.
    pub(crate) fn over_quota(over: &dripfeed::keyed::OverQuota) -> Refusal {
        Refusal {
            cause: Cause::OverQuota,
            fields: dripfeed::headers::for_over_quota(over),
        }
    }

    /// A refusal for `cause` without a hint (waiting does not help).
    pub(crate) fn now(cause: Cause) -> Refusal {
        Refusal {
            cause,
            fields: Vec::new(),
        }
    }
}

/// Why a webhook was refused (intake answers each with its status and
/// problem type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// 503 `overloaded`: the destination's queue (or the relay's bound on
    /// webhooks held) is full.
    Full,
    /// 503 `overloaded`: the byte budget has no room.
    NoRoom,
    /// 429 `over-quota`: its tenant is over its quota.
    OverQuota,
    /// 503 `closed`: the relay is shutting down.
    Closed,
    /// 404 `unknown-destination`: deleted while this one was on its way in.
    Gone,
    /// 422 `key-reused`: its `Idempotency-Key` named another request.
    KeyReused,
    /// 409 `key-in-progress`: a request with its key is being admitted.
    KeyInProgress,
    /// 503 `unavailable`: a store the admission needs cannot take it now.
    Unavailable(Store),
    /// 503 `unreplicated`: queued (as this id: the second number), but
    /// fewer Redis replicas than asked confirmed it (this many did). (The fleet's engine's only.)
    #[allow(dead_code)]
    Unreplicated(u64, u64),
    /// 503 `unanswered`: Redis did not answer the admission in time, so
    /// the webhook may have been queued, as this id. (The fleet's
    /// engine's only.)
    #[allow(dead_code)]
    Unanswered(u64),
    /// 400 `invalid`: it can never be admitted (too large to record).
    Invalid,
}

/// Which store refused a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    /// The journal holds its size bound.
    JournalFull,
    /// The journal cannot write.
    JournalFailed,
    /// The tenant quota store cannot be reached (failing closed).
    Quotas,
    /// The shared queue (Redis) cannot be reached. (The fleet's engine's
    /// only.)
    #[allow(dead_code)]
    Queue,
}

/// A destination change made: 201 or 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Put {
    /// Made (201).
    Made,
    /// Changed (200).
    Changed,
}

/// A destination change made, and the destination's entity tag after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changed {
    /// Made or changed.
    pub put: Put,
    /// Its `ETag` now.
    pub etag: String,
}

/// A destination change refused: the status, problem type and detail.
#[derive(Debug, Clone)]
pub(crate) struct ChangeRefused {
    /// 404, 409, 422 or 503.
    pub status: u16,
    /// The problem type.
    pub kind: &'static str,
    /// What is wrong.
    pub detail: String,
}

impl ChangeRefused {
    /// A refusal with `status`, `kind` and `detail`.
    pub(crate) fn new(status: u16, kind: &'static str, detail: impl Into<String>) -> ChangeRefused {
        ChangeRefused {
            status,
            kind,
            detail: detail.into(),
        }
    }

    /// 404: no destination of that name.
    pub(crate) fn unknown() -> ChangeRefused {
        ChangeRefused::new(
            404,
            "unknown-destination",
            "no destination of that name (one being deleted is gone for changes: GET shows it draining)",
        )
    }

    /// 404: no application of that name.
    pub(crate) fn unknown_application() -> ChangeRefused {
        ChangeRefused::new(404, "unknown-application", "no application of that name")
    }

    /// 422: a change would move an endpoint to another application, or
    /// make it a plain destination, or a plain destination an endpoint.
    pub(crate) fn application_fixed() -> ChangeRefused {
        ChangeRefused::new(
            422,
            "bad-destination",
            "application: it cannot be changed (delete the endpoint and make it under the \
             other application): its events' history stays its application's",
        )
    }

    /// 503: shutdown has begun.
    pub(crate) fn closing() -> ChangeRefused {
        ChangeRefused::new(503, "closed", "the relay is shutting down")
    }

    /// 412: `If-Match` or `If-None-Match` no longer holds.
    pub(crate) fn precondition() -> ChangeRefused {
        ChangeRefused::new(
            412,
            "precondition-failed",
            "it is not as If-Match or If-None-Match says (changed, made or deleted \
             meanwhile): read it again (its ETag) and retry",
        )
    }
}

impl From<EditError> for ChangeRefused {
    fn from(e: EditError) -> ChangeRefused {
        match e {
            EditError::Unknown => ChangeRefused::unknown(),
            EditError::Precondition => ChangeRefused::precondition(),
            EditError::Unprocessable(kind, detail) => ChangeRefused::new(422, kind, detail),
        }
    }
}

impl From<Unfit> for ChangeRefused {
    fn from((kind, detail): Unfit) -> ChangeRefused {
        ChangeRefused::new(422, kind, detail)
    }
}
