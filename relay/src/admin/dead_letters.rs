//! `GET /v1/dead-letters?destination=&limit=&cursor=`: a page of the dead
//! letters, oldest first, with an opaque cursor for the next page, from the
//! queue (the dead-letter files with the local engine, Redis with the
//! fleet's).

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::Admin;
use crate::dead_letter::page::DeadLetter;
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;
use crate::queue::{LetterError, LetterQuery};

/// Lines a page holds unless `limit` says.
const DEFAULT_LIMIT: usize = 100;
/// The most lines a page holds.
const MAX_LIMIT: usize = 1000;

/// A page of dead letters.
#[derive(Serialize, ToSchema)]
pub(crate) struct DeadLetterPage {
    /// The lines, oldest first.
    dead_letters: Vec<DeadLetter>,
    /// Where the next page starts: pass it as `cursor` (also once this page
    /// reached the end: later lines follow from there). `null` while there
    /// is no dead-letter file.
    next_cursor: Option<String>,
    /// Whether the page stopped at its limit, so more lines follow now.
    more: bool,
}

/// 503: the dead letters cannot be read.
pub(super) fn unreadable(detail: String) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "dead-letter-unreadable",
        detail,
        Vec::new(),
    )
}

/// `GET /v1/dead-letters`.
#[utoipa::path(get, path = "/v1/dead-letters", tag = "admin", operation_id = "list_dead_letters",
    security(("admin_token" = [])),
    params(
        ("destination" = Option<String>, Query, description = "Only this destination's lines."),
        ("limit" = Option<u32>, Query, description = "Lines in the page (default 100); a page also stops past 4 MiB of lines.", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^[A-Za-z0-9_-]{1,512}$", nullable = false, description = "Where to start: a next_cursor an earlier page gave (opaque, URL-safe base64). Absent: the oldest letter. A cursor whose file was moved away starts again at the oldest file. With queue = redis the fleet's dead letters are read from Redis, by destination name then oldest first."),
    ),
    responses(
        (status = 200, description = "A page of dead-letter lines, oldest first.", body = DeadLetterPage),
        (status = 400, description = "A limit that is not a number from 1 to 1000, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor this relay did not give.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The dead-letter files (with queue = redis, Redis) cannot be read, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(State(admin): State<Arc<Admin>>, RawQuery(raw): RawQuery) -> Response {
    let q = match super::paging::parse(raw.as_deref(), DEFAULT_LIMIT, MAX_LIMIT, &["destination"]) {
        Ok(q) => q,
        Err(resp) => return *resp,
    };
    let query = LetterQuery {
        destination: q.filter("destination").map(str::to_owned),
        cursor: q.cursor,
        limit: q.limit,
    };
    match admin.queue.dead_letters(query).await {
        Ok(p) => Json(DeadLetterPage {
            dead_letters: p.lines,
            next_cursor: p.next,
            more: p.more,
        })
        .into_response(),
        Err(LetterError::BadCursor) => super::paging::bad_cursor(),
        Err(LetterError::Unreadable(e)) => unreadable(e),
    }
}
