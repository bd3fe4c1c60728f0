//! `POST /v1/dead-letters/redrive` with `{"ids": [...]}` or
//! `{"destination": "..."}`: the dead letters it names admitted again, each
//! under the id it had, to the destination it came from and only there,
//! up to 1000 a request (`more` says when more remain). Each letter
//! re-admitted is marked before the answer and never redriven again
//! (`--redrive FILE` reads the same marks); one refused for now (a full
//! queue or byte budget) stays, to be redriven later; one whose
//! destination is gone stays where it is, named in `kept`. One redrive
//! runs at a time.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Admin;
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;
use crate::queue::{Kept, LetterError, Redrive};

/// Lines one request re-admits at most.
const MAX_LINES: usize = 1000;

/// What to redrive: exactly one of `ids` and `destination`. Described
/// here; the body is read as [`Given`], so that a wrong one is a 422
/// naming the rule.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum RedriveRequest {
    /// The dead letters of these webhooks.
    Ids(RedriveIds),
    /// Every dead letter of a destination.
    Destination(RedriveDestination),
}

/// The dead letters of these webhooks.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct RedriveIds {
    /// Their ids (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    ids: Vec<String>,
}

/// Every dead letter of a destination.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct RedriveDestination {
    /// The destination's name.
    #[schema(
        pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$"
    )]
    destination: String,
}

/// The body as sent: exactly one of its fields is taken.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Given {
    ids: Option<Vec<String>>,
    destination: Option<String>,
}

/// What a redrive did.
#[derive(Serialize, ToSchema)]
pub(crate) struct RedriveResult {
    /// Letters admitted again (and marked: never redriven twice).
    readmitted: u64,
    /// Letters of event copies sent again since they were dead-lettered
    /// (a recover, a resend): marked, nothing sent again.
    settled: u64,
    /// Letters refused for now (a full queue or byte budget): left to
    /// redrive later.
    refused: u64,
    /// Whether more letters of the request remain (past 1000): ask again.
    more: bool,
    /// Letters that stay where they are, each with why: the destination
    /// they came from is gone (a letter goes back only there), or they do
    /// not read.
    kept: Vec<Kept>,
}

fn unprocessable(detail: &str) -> Response {
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad-redrive",
        detail.to_owned(),
        Vec::new(),
    )
}

/// `POST /v1/dead-letters/redrive`.
#[utoipa::path(post, path = "/v1/dead-letters/redrive", tag = "admin",
    security(("admin_token" = [])),
    request_body(content = RedriveRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "What was re-admitted and refused.", body = RedriveResult),
        (status = 400, description = "The body is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the admin API takes (64 KiB).", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not exactly one of ids and destination, no ids, too many, or unknown fields.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The dead-letter files (with queue = redis, Redis) cannot be read or marked, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn redrive(
    State(admin): State<Arc<Admin>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match super::change_answers::read_body(body) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let request: Given = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => {
            let detail = format!("the body is not JSON: {e}");
            return problem(StatusCode::BAD_REQUEST, "bad-json", detail, Vec::new());
        }
        Ok(v) => match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => return unprocessable(&format!("the body does not read: {e}")),
        },
    };
    let what = match (request.ids, request.destination) {
        (Some(ids), None) if !ids.is_empty() && ids.len() <= MAX_LINES => {
            Redrive::Ids(ids.into_iter().collect::<HashSet<String>>())
        }
        (None, Some(name)) if crate::config::valid_name(&name) => Redrive::Destination(name),
        _ => {
            return unprocessable(
                "give exactly one of ids (1 to 1000) and destination (a destination's name)",
            );
        }
    };
    match admin.queue.redrive(what, MAX_LINES).await {
        Ok(done) => Json(RedriveResult {
            readmitted: done.readmitted,
            settled: done.settled,
            refused: done.refused,
            more: done.more,
            kept: done.kept,
        })
        .into_response(),
        Err(LetterError::BadCursor) => unprocessable("not a redrive"),
        Err(LetterError::Unreadable(e)) => super::dead_letters::unreadable(e),
    }
}
