//! A webhook the queue refused, as the problem intake answers (its status,
//! problem type and detail by cause), counted by kind in [`Answers`].

use axum::http::StatusCode;
use axum::response::Response;

use super::answers::Answers;
use crate::domain::problem::{Reason, problem};
use crate::queue::{Cause, Refusal, Store};

/// The problem for `r`, counted in `answers`.
pub(super) fn refused(answers: &Answers, r: Refusal) -> Response {
    use StatusCode as S;
    // The reason counted: the problem type, or a finer cause.
    let mut reason = None;
    let (status, kind, detail): (StatusCode, &'static str, String) = match r.cause {
        Cause::Full => {
            Answers::bump(&answers.full_503);
            reason = Some("queue-full");
            let detail = "the delivery queue is full; retry later";
            (S::SERVICE_UNAVAILABLE, "overloaded", detail.into())
        }
        Cause::NoRoom => {
            Answers::bump(&answers.bytes_503);
            reason = Some("byte-budget");
            let detail = "the relay holds its byte budget of webhooks and keys; retry later";
            (S::SERVICE_UNAVAILABLE, "overloaded", detail.into())
        }
        Cause::OverQuota => {
            Answers::bump(&answers.quota_429);
            let detail = "this tenant is over its quota; retry later";
            (S::TOO_MANY_REQUESTS, "over-quota", detail.into())
        }
        Cause::Closed => {
            Answers::bump(&answers.closed_503);
            let detail = "the relay is shutting down";
            (S::SERVICE_UNAVAILABLE, "closed", detail.into())
        }
        Cause::Gone => {
            let detail = "no destination of that name is configured";
            (S::NOT_FOUND, "unknown-destination", detail.into())
        }
        Cause::KeyReused => {
            let detail = "this Idempotency-Key was used with another request (another body, destination or event type)";
            (S::UNPROCESSABLE_ENTITY, "key-reused", detail.into())
        }
        Cause::KeyInProgress => {
            let detail = "a request with this Idempotency-Key is still being admitted";
            (S::CONFLICT, "key-in-progress", detail.into())
        }
        Cause::Unavailable(store) => {
            let detail = match store {
                Store::JournalFull => {
                    Answers::bump(&answers.journal_503);
                    reason = Some("journal-full");
                    "the relay's journal is full; retry later"
                }
                Store::JournalFailed => {
                    Answers::bump(&answers.journal_503);
                    reason = Some("journal-failed");
                    "the relay cannot write its journal; retry later"
                }
                Store::Quotas => {
                    Answers::bump(&answers.store_503);
                    reason = Some("quota-store");
                    "the tenant quota store is unavailable; retry later"
                }
                Store::Queue => {
                    Answers::bump(&answers.store_503);
                    reason = Some("redis");
                    "the shared queue (Redis) cannot take webhooks now; retry later"
                }
            };
            (S::SERVICE_UNAVAILABLE, "unavailable", detail.into())
        }
        Cause::Unreplicated(replicas, id) => {
            Answers::bump(&answers.store_503);
            let detail = format!(
                "only {replicas} Redis replica(s) confirmed it in time: it was taken as {id} \
                 and may still be delivered, or be lost with the primary; retry with the same \
                 Idempotency-Key"
            );
            (S::SERVICE_UNAVAILABLE, "unreplicated", detail)
        }
        Cause::Unanswered(id) => {
            Answers::bump(&answers.store_503);
            let detail = format!(
                "the shared queue (Redis) did not answer in time: the webhook may have been \
                 queued as {id} and may still be delivered (GET /v1/webhooks/{id} tells once \
                 Redis answers); retry with the same Idempotency-Key"
            );
            (S::SERVICE_UNAVAILABLE, "unanswered", detail)
        }
        Cause::Invalid => {
            let detail = "this webhook can never be admitted";
            (S::BAD_REQUEST, "invalid", detail.into())
        }
    };
    let mut resp = problem(status, kind, detail, r.fields);
    if let Some(reason) = reason {
        resp.extensions_mut().insert(Reason(reason));
    }
    resp
}
