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
use crate::status::view;

/// The handler.
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
