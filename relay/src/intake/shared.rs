//! Step 5 with `queue = redis`: the webhook goes into the fleet's queue in
//! Redis ([`crate::queue::shared`]), its idempotency key checked there (so
//! a sender's retry that lands on another relay is the same webhook).

#![cfg(feature = "redis")]

use axum::http::StatusCode;
use axum::response::Response;
use dripfeed::headers;

use super::answers::Answers;
use super::{Intake, Refusal};
use crate::domain::job::Job;
use crate::domain::names::Tenant;
use crate::domain::problem::problem;
use crate::queue::shared::{Admit, Shared};

/// The 202 (or the refusal) for `job`, queued in `shared` for `destination`.
pub(super) async fn take(
    intake: &Intake,
    shared: &Shared,
    tenant: &Tenant,
    key: Option<&str>,
    charged: bool,
    destination: &str,
    job: Job,
) -> Result<Response, Refusal> {
    let scoped = key.map(|k| format!("{}:{k}", tenant.scope()));
    let charge = charged.then(|| tenant.scope());
    let owner = tenant.named.as_deref();
    match shared
        .admit(destination, &job, scoped.as_deref(), charge, owner)
        .await
    {
        Ok(Admit::Queued(id)) => {
            Answers::bump(&intake.answers.queued);
            Ok(super::answers::accepted_202("queued", id))
        }
        Ok(Admit::Repeat(id)) => Ok(super::answers::accepted_202("duplicate", id)),
        Ok(Admit::Full(wait)) => {
            Answers::bump(&intake.answers.full_503);
            let retry = headers::retry_after(headers::jittered(wait));
            Err(Box::new(problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "the fleet's delivery queue for this destination is full; retry later".into(),
                vec![("retry-after", retry)],
            )))
        }
        Ok(Admit::OverQuota(wait)) => {
            Answers::bump(&intake.answers.quota_429);
            let retry = headers::retry_after(headers::jittered(wait));
            Err(Box::new(problem(
                StatusCode::TOO_MANY_REQUESTS,
                "over-quota",
                "this tenant is over its quota; retry later".into(),
                vec![("retry-after", retry)],
            )))
        }
        Ok(Admit::QuotaUnavailable) => {
            Answers::bump(&intake.answers.store_503);
            Err(Box::new(problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the tenant quota store is unavailable; retry later".into(),
                vec![("retry-after", "1".to_owned())],
            )))
        }
        Ok(Admit::Unconfirmed(replicas)) => {
            Answers::bump(&intake.answers.store_503);
            tracing::warn!(
                replicas,
                "shared queue: a webhook was not confirmed by enough replicas"
            );
            Err(Box::new(problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "unreplicated",
                format!(
                    "only {replicas} Redis replica(s) confirmed the webhook in time: it may be \
                     lost with the primary, and it may still be delivered; retry with the same \
                     Idempotency-Key"
                ),
                vec![("retry-after", "1".to_owned())],
            )))
        }
        Err(e) => {
            Answers::bump(&intake.answers.store_503);
            tracing::warn!(error = %e, "shared queue: a webhook could not be queued");
            Err(Box::new(problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the shared queue (Redis) cannot take webhooks now; retry later".into(),
                vec![("retry-after", "1".to_owned())],
            )))
        }
    }
}
