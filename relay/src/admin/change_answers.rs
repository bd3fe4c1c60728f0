//! What the admin API's changes answer besides the destination's view:
//! the queue's refusals as problems ([`super::change`], [`super::destinations`]).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::catalog::edit::Precondition;
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

/// 404: no application of that name.
pub(super) fn unknown_application() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "unknown-application",
        "no application of that name".into(),
        Vec::new(),
    )
}

/// 404: no destination of that name.
pub(super) fn unknown_destination() -> Response {
    refusal(ChangeRefused::unknown())
}

/// The most a request body to the admin API may hold (its router's
/// `DefaultBodyLimit`).
pub(super) const MAX_BODY: usize = 64 * 1024;

/// A request's body, or its problem: 413 past [`MAX_BODY`], 400 when it
/// could not be read.
pub(super) fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Box<Response>> {
    body.map_err(|e| {
        Box::new(match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the admin API takes bodies of at most {MAX_BODY} bytes"),
                Vec::new(),
            ),
            status => problem(
                StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_REQUEST),
                "bad-body",
                e.body_text(),
                Vec::new(),
            ),
        })
    })
}

/// The conditions `If-Match` and `If-None-Match` put on a change, or
/// their 400.
pub(super) fn precondition(headers: &HeaderMap) -> Result<Precondition, Box<Response>> {
    let text = |name: header::HeaderName| -> Result<Option<&str>, String> {
        match headers.get(&name) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .map(Some)
                .map_err(|_| format!("{name}: not visible ASCII")),
        }
    };
    text(header::IF_MATCH)
        .and_then(|m| Ok((m, text(header::IF_NONE_MATCH)?)))
        .and_then(|(m, n)| Precondition::of(m, n))
        .map_err(|detail| {
            Box::new(problem(
                StatusCode::BAD_REQUEST,
                "bad-precondition",
                detail,
                Vec::new(),
            ))
        })
}

/// `response` with the entity tag `etag`.
pub(super) fn tagged(mut response: Response, etag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}
