//! What the admin API's changes answer besides the destination's view:
//! the queue's refusals as problems ([`super::change`], [`super::destinations`]).

use axum::http::StatusCode;
use axum::response::Response;

use crate::domain::problem::problem;
use crate::queue::ChangeRefused;

/// 422 with what is wrong.
pub(super) fn unprocessable(kind: &'static str, detail: String) -> Response {
    problem(StatusCode::UNPROCESSABLE_ENTITY, kind, detail, Vec::new())
}

/// The queue's refusal of a change.
pub(super) fn refusal(r: ChangeRefused) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    problem(status, r.kind, r.detail, Vec::new())
}

/// 404: no destination of that name.
pub(super) fn unknown_destination() -> Response {
    refusal(ChangeRefused::unknown())
}
