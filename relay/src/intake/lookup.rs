//! `GET /v1/webhooks/{id}` on intake: a webhook's status, to the tenant
//! that sent it. With `[[tenants]]` the caller's key decides the tenant
//! (401 without a good one, as for posting), and a webhook of another
//! tenant answers the same 404 as an unknown id; on an open relay every
//! caller sees every webhook.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::Intake;
use crate::domain::schemas::Problem;
use crate::status::view::{self, WebhookStatus};
#[cfg(feature = "redis")]
use crate::status::{Found, State as Where, Status};

/// `GET /v1/webhooks/{id}`.
#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "intake", operation_id = "get_webhook",
    security(("tenant_key" = [])),
    params(("id" = String, Path, description = "The id the 202 named.")),
    responses(
        (status = 200, description = "The webhook's status.", body = WebhookStatus),
        (status = 401, description = "No key, an unknown one or an expired one (with [[tenants]]).", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 404, description = "Unknown, forgotten after status_retention, or another tenant's: the same answer.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections, or (queue = redis) Redis cannot be read.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn webhook(
    State(intake): State<Arc<Intake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if intake.tenants.is_none() {
        return answer(&intake, &id, None).await;
    }
    match intake.caller(&headers) {
        Ok(caller) => match &caller.account {
            Some(account) => answer(&intake, &id, Some(&account.name)).await,
            None => view::unknown(),
        },
        Err(refusal) => *refusal,
    }
}

/// The status of webhook `id` for a caller who may see the webhooks of
/// `owner` (`None`: every webhook): from this relay's registry, or with
/// `queue = redis` from the fleet's records in Redis (any relay answers
/// for any webhook).
pub async fn answer(intake: &Intake, id: &str, owner: Option<&Arc<str>>) -> Response {
    #[cfg(feature = "redis")]
    if let Some(shared) = &intake.shared {
        let Some(number) = view::parse(id) else {
            return view::unknown();
        };
        return match shared.status(number).await {
            Ok(found) => view::respond(number, found.map(shared_found), owner),
            Err(e) => {
                tracing::warn!(error = %e, "shared queue: a webhook's status could not be read");
                crate::domain::problem::problem(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the shared queue (Redis) cannot be read now; retry later".into(),
                    vec![("retry-after", "1".to_owned())],
                )
            }
        };
    }
    view::answer(&intake.status, id, owner)
}

/// A status read from the fleet's records, as the registry's.
#[cfg(feature = "redis")]
fn shared_found((destination, s): (String, dripfeed::global::JobStatus)) -> Found {
    use dripfeed::global::JobState;
    Found {
        status: Status {
            state: match s.state {
                JobState::Queued => Where::Queued,
                JobState::InFlight => Where::InFlight,
                JobState::RetryWaiting => Where::RetryWaiting,
                JobState::Delivered => Where::Delivered,
                JobState::DeadLettered => Where::DeadLettered,
            },
            tenant: s.owner.map(Arc::from),
            destination: Some(Arc::from(destination)),
            attempts: s.attempts,
            last_status: s.last_status,
            next_attempt_unix_ms: s.next_attempt_unix_ms,
            received_unix_ms: Some(s.received_unix_ms),
        },
        ended_unix_ms: s.ended_unix_ms,
    }
}
