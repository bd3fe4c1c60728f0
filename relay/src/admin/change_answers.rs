//! What `PUT` and `DELETE /v1/destinations/{name}` answer besides the
//! destination's view, in either mode ([`super::change`], with a state
//! file; [`super::change_fleet`], with `queue = redis`).

use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::problem::problem;

/// What a `DELETE` left to drain.
#[derive(Serialize, ToSchema)]
pub struct Deleting {
    /// The destination.
    pub(super) name: String,
    /// Webhooks it held when deleted (with `queue = redis`: the fleet's
    /// queue for it): delivered within `grace_ms`, then dead-lettered.
    pub(super) held: u64,
    /// The time it has to deliver them, ms (the shutdown grace).
    pub(super) grace_ms: u64,
}

/// 422 with what is wrong.
pub(super) fn unprocessable(kind: &str, detail: String) -> Response {
    problem(StatusCode::UNPROCESSABLE_ENTITY, kind, detail, Vec::new())
}

/// 409 with why.
pub(super) fn conflict(kind: &str, detail: &str) -> Response {
    problem(StatusCode::CONFLICT, kind, detail.to_owned(), Vec::new())
}

/// 404: no destination of that name.
pub(super) fn unknown_destination() -> Response {
    let detail = "no destination of that name is configured".to_owned();
    problem(
        StatusCode::NOT_FOUND,
        "unknown-destination",
        detail,
        Vec::new(),
    )
}

/// 503: shutdown has begun.
pub(super) fn closing() -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "closed",
        "the relay is shutting down".to_owned(),
        Vec::new(),
    )
}
