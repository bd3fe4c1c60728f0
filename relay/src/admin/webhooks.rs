//! `GET /v1/webhooks/{id}` on the admin listener: any webhook's status,
//! whoever sent it, to the admin token.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;

use super::Admin;
use crate::status::view;

/// The handler.
pub async fn webhook(State(admin): State<Arc<Admin>>, Path(id): Path<String>) -> Response {
    view::answer(&admin.intake.status, &id, None)
}
