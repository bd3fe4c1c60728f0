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
use crate::queue::Queue;
use crate::status::view::{self, WebhookStatus};

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
pub(crate) async fn webhook(
    State(intake): State<Arc<Intake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if intake.tenants.is_none() {
        return answer(intake.queue.as_ref(), &id, None).await;
    }
    match intake.caller(&headers) {
        Ok(caller) => match &caller.account {
            Some(account) => answer(intake.queue.as_ref(), &id, Some(&account.name)).await,
            None => view::unknown(),
        },
        Err(refusal) => *refusal,
    }
}

/// The status of webhook `id` for a caller who may see the webhooks of
/// `owner` (`None`: every webhook), from the queue (with `queue = redis`
/// the fleet's records: any relay answers for any webhook).
pub(crate) async fn answer(queue: &dyn Queue, id: &str, owner: Option<&Arc<str>>) -> Response {
    let Some(number) = view::parse(id) else {
        return view::unknown();
    };
    match queue.status(number).await {
        Ok(found) => view::respond(number, found, owner),
        Err(e) => {
            tracing::warn!(error = %e, "a webhook's status could not be read");
            crate::domain::problem::problem(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the webhooks' statuses cannot be read now; retry later".into(),
                vec![("retry-after", "1".to_owned())],
            )
        }
    }
}
