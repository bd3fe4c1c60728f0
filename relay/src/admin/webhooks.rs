//! `GET /v1/webhooks/{id}` on the admin listener: any webhook's status,
//! whoever sent it, to the admin token.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;

use super::Admin;
use crate::domain::schemas::Problem;
use crate::status::view::WebhookStatus;

/// `GET /v1/webhooks/{id}`.
#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The id the 202 named.")),
    responses(
        (status = 200, description = "The webhook's status.", body = WebhookStatus),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown, or forgotten after status_retention.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections, or (queue = redis) Redis cannot be read.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn webhook(State(admin): State<Arc<Admin>>, Path(id): Path<String>) -> Response {
    crate::intake::lookup::answer(admin.queue.as_ref(), &id, None).await
}
