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
use crate::openapi::schemas::Problem;
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
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn webhook(
    State(intake): State<Arc<Intake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if intake.tenants.is_none() {
        return view::answer(&intake.status, &id, None);
    }
    match intake.caller(&headers) {
        Ok(caller) => match &caller.account {
            Some(account) => view::answer(&intake.status, &id, Some(&account.name)),
            None => view::unknown(),
        },
        Err(refusal) => *refusal,
    }
}
