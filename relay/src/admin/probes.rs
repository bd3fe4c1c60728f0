//! The probes. `GET /healthz`: the process lives and serves (200). `GET
//! /readyz`: whether a webhook taken now can be kept, as the queue says
//! ([`crate::queue::Queue::down`]) — 200 while the journal's directory is
//! present and writable, the dead-letter file takes lines, the shared
//! queue's Redis and the shared tenant store answer; otherwise 503 with a
//! problem body naming each thing down (`down`: `journal`, `dead-letter`,
//! `redis`, `postgres`). Neither needs a token.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::Admin;
use crate::domain::schemas::{NotReady, Problem, Ready};

/// `GET /healthz`.
#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses(
        (status = 200, description = "The relay serves.", body = String, content_type = "text/plain", example = "ok\n"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`.
#[utoipa::path(get, path = "/readyz", tag = "probes",
    responses(
        (status = 200, description = "Ready: a webhook taken now can be kept.", body = Ready),
        (status = 503, description = "Not ready, naming what is down (or the listener serves its most connections).", body = NotReady, content_type = "application/problem+json"),
    ))]
pub(crate) async fn readyz(State(admin): State<Arc<Admin>>) -> Response {
    let down = admin.queue.down().await;
    if down.is_empty() {
        return Json(json!({"status": "ready"})).into_response();
    }
    let names: Vec<&str> = down.iter().map(|(n, _)| *n).collect();
    let reasons: Vec<_> = down
        .iter()
        .map(|(n, why)| json!({"name": n, "detail": why}))
        .collect();
    let body = json!({
        "type": "urn:dripfeed:problem:not-ready",
        "title": "Service Unavailable",
        "status": 503,
        "detail": format!("not ready: {} down", names.join(", ")),
        "down": reasons,
    });
    let mut resp = (StatusCode::SERVICE_UNAVAILABLE, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    resp
}
