//! `POST /v1/dead-letters/redrive` with `{"ids": [...]}` or
//! `{"destination": "..."}`: the dead-letter lines it names admitted again,
//! each under the id it had, to the destination its line names (as
//! `--redrive` does), up to 1000 a request (`more` says when more remain).
//! Each line re-admitted is marked in `FILE.redriven`
//! ([`crate::dead_letter::marks`]) before the answer, and never redriven
//! again; a line refused (a full queue or byte budget, a destination no
//! longer configured) stays unmarked, to be redriven later. One redrive
//! runs at a time.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Admin;
use crate::dead_letter::{marks, redrive};
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;

/// Lines one request re-admits at most.
const MAX_LINES: usize = 1000;

/// What to redrive: give exactly one of `ids` and `destination`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    /// The ids of the webhooks to redrive (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    ids: Option<Vec<String>>,
    /// Every dead letter of this destination.
    destination: Option<String>,
}

/// What a redrive did.
#[derive(Serialize, ToSchema)]
pub struct RedriveResult {
    /// Lines admitted again (and marked: never redriven twice).
    readmitted: u64,
    /// Lines refused (a full queue or byte budget, a destination no longer
    /// configured, a line that does not read): left to redrive later.
    refused: u64,
    /// Whether more lines of the request remain (past 1000): ask again.
    more: bool,
}

/// A line's id and destination, all a redrive matches on.
#[derive(Deserialize)]
struct Probe {
    id: Option<String>,
    destination: Option<String>,
}

fn unprocessable(detail: &str) -> Response {
    problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad-redrive",
        detail.to_owned(),
        Vec::new(),
    )
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "dead-letter-unreadable",
        format!("the dead-letter files cannot be read or marked: {e}"),
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
        (status = 422, description = "Not exactly one of ids and destination, no ids, too many, or unknown fields.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The dead-letter files (with queue = redis, Redis) cannot be read or marked, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn redrive(State(admin): State<Arc<Admin>>, body: Bytes) -> Response {
    let request: RedriveRequest = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => {
            let detail = format!("the body is not JSON: {e}");
            return problem(StatusCode::BAD_REQUEST, "bad-json", detail, Vec::new());
        }
        Ok(v) => match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => return unprocessable(&format!("the body does not read: {e}")),
        },
    };
    let (ids, destination) = match (request.ids, request.destination) {
        (Some(ids), None) if !ids.is_empty() && ids.len() <= MAX_LINES => {
            (Some(ids.into_iter().collect::<HashSet<String>>()), None)
        }
        (None, Some(name)) => (None, Some(name)),
        _ => return unprocessable("give exactly one of ids (1 to 1000) and destination"),
    };
    let _one_at_a_time = admin.redriving.lock().await;
    // With queue = redis, the fleet's dead letters go back into the fleet's
    // queue, from Redis, each with its id.
    #[cfg(feature = "redis")]
    if let Some(shared) = &admin.intake.shared {
        return match shared
            .redrive(ids.as_ref(), destination.as_deref(), MAX_LINES)
            .await
        {
            Ok((readmitted, refused, more)) => Json(RedriveResult {
                readmitted,
                refused,
                more,
            })
            .into_response(),
            Err(e) => super::dead_letters::fleet_unreadable(&e),
        };
    }
    let wanted: Box<dyn Fn(&Probe) -> bool + Send> = match (ids, destination) {
        (Some(ids), _) => Box::new(move |p| p.id.as_ref().is_some_and(|id| ids.contains(id))),
        (None, name) => Box::new(move |p| p.destination.as_deref() == name.as_deref()),
    };
    let live = admin.dead_letter_file.clone();
    let picked = tokio::task::spawn_blocking(move || {
        let done = marks::load(&live)?;
        marks::pick(&live, &done, MAX_LINES, |line| {
            serde_json::from_str::<Probe>(line).is_ok_and(|p| wanted(&p))
        })
    })
    .await;
    let (lines, more) = match picked {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return unavailable(e),
        Err(e) => return unavailable(e),
    };
    let intake = &admin.intake;
    let targets = admin.catalog.targets();
    let (mut readmitted, mut refused) = (Vec::new(), 0u64);
    for (place, line) in lines {
        let Some((name, job)) = redrive::job_of_line(&line, &targets, &intake.budget) else {
            refused += 1;
            continue;
        };
        match intake.set.try_submit_durable(name, job).await {
            Ok(_) => readmitted.push(place),
            Err(_) => refused += 1,
        }
    }
    let live = admin.dead_letter_file.clone();
    let count = readmitted.len() as u64;
    match tokio::task::spawn_blocking(move || marks::add(&live, &readmitted)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return unavailable(e),
        Err(e) => return unavailable(e),
    }
    Json(RedriveResult {
        readmitted: count,
        refused,
        more,
    })
    .into_response()
}
