//! The admin listener (`admin_listen`, `127.0.0.1:8090` by default), apart
//! from intake: what the operator and the platform read.
//!
//! - `GET /healthz`, `GET /readyz` ([`probes`]) and `GET /metrics`
//!   (Prometheus text, passing `promtool check metrics`) answer without a
//!   token, so probes and Prometheus need no secret;
//! - `GET /v1/destinations`, `GET /v1/destinations/{name}`
//!   ([`destinations`]), `PUT` and `DELETE /v1/destinations/{name}`
//!   ([`change`]) need `Authorization: Bearer ADMIN_TOKEN` when
//!   `admin_token_sha256` is set ([`token`]); without it the admin listener
//!   may only be on loopback (the configuration refuses anything else
//!   unless `allow_unauthenticated`), where they answer anyone;
//! - `GET /v1/webhooks/{id}` ([`webhooks`]): any webhook's status, under
//!   the same token;
//! - `GET /v1/dead-letters` ([`dead_letters`]): a page of the dead-letter
//!   lines, oldest first, and `POST /v1/dead-letters/redrive`
//!   ([`redrive`]), under the same token.
//!
//! The status line on stdout is [`status`].

pub mod change;
mod change_answers;
mod change_fleet;
pub mod dead_letters;
pub mod destinations;
pub mod probes;
pub mod redrive;
pub mod status;
pub mod stores;
pub mod token;
pub mod webhooks;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::digest::KeyDigest;
use crate::catalog::Catalog;
use crate::catalog::state::StateFile;
use crate::dead_letter::FileSink;
use crate::deliver::guard::AddressGuard;
use crate::domain::schemas::Problem;
use crate::intake::Intake;
use crate::openapi;
use crate::telemetry;

/// What the admin routes read.
pub struct Admin {
    /// Intake: the destinations set (with its journal), the dead-letter
    /// file's health, the byte budget and the idempotency keys.
    pub intake: Arc<Intake>,
    /// The Prometheus recorder's page.
    pub prometheus: PrometheusHandle,
    /// The admin token's digest; `None`: the routes are open (loopback).
    pub token: Option<KeyDigest>,
    /// The destinations in force: what `/v1/destinations` shows beside
    /// their live state, and what `PUT` and `DELETE` change.
    pub catalog: Arc<Catalog>,
    /// What a destination leaves to the settings.
    pub defaults: destinations::Defaults,
    /// The state file the admin API's changes go to (`None`: no state
    /// directory, changes refused); held by the change running.
    pub state: tokio::sync::Mutex<Option<StateFile>>,
    /// The state file's path (what a destination made here names as its
    /// origin).
    pub state_path: std::path::PathBuf,
    /// Where deliveries may connect: a `PUT` URL is checked against it.
    pub guard: Arc<AddressGuard>,
    /// Whether a `PUT` URL's host name is resolved and checked too
    /// (`resolve_destinations_at_start`).
    pub resolve: bool,
    /// `max_destinations`.
    pub max_destinations: usize,
    /// How long a deleted destination may still deliver (`shutdown_grace`).
    pub grace: std::time::Duration,
    /// The dead-letter file (what a deleted destination hands back).
    pub sink: Arc<FileSink>,
    /// The shared stores `/readyz` asks (the tenant quota store).
    pub stores: Vec<stores::StoreCheck>,
    /// The live dead-letter file (its rotated ones beside it).
    pub dead_letter_file: std::path::PathBuf,
    /// Held by the redrive running.
    pub redriving: tokio::sync::Mutex<()>,
    /// With `queue = redis`: the fleet's destination changes, in Redis
    /// (what `PUT` and `DELETE` write instead of a state file).
    #[cfg(feature = "redis")]
    pub fleet: Option<Arc<crate::queue::shared_changes::Fleet>>,
}

/// The routes that need the admin token.
fn guarded() -> OpenApiRouter<Arc<Admin>> {
    OpenApiRouter::new()
        .routes(routes!(destinations::list))
        .routes(routes!(destinations::one, change::put, change::delete))
        .routes(routes!(webhooks::webhook))
        .routes(routes!(dead_letters::list))
        .routes(routes!(redrive::redrive))
}

/// The routes open to anyone who reaches the listener.
fn open() -> OpenApiRouter<Arc<Admin>> {
    OpenApiRouter::new()
        .routes(routes!(metrics))
        .routes(routes!(probes::healthz))
        .routes(routes!(probes::readyz))
}

/// Every admin route, each with its OpenAPI description.
pub fn routes() -> OpenApiRouter<Arc<Admin>> {
    open().merge(guarded())
}

/// The admin router, serving its document at `/openapi.json`.
pub fn router(admin: Arc<Admin>) -> Router {
    let guarded = guarded().route_layer(axum::middleware::from_fn_with_state(
        admin.clone(),
        token::require,
    ));
    openapi::finish(open().merge(guarded), openapi::Listener::Admin, admin, &[])
}

/// `GET /metrics`: the relay's own gauges set, then the page.
#[utoipa::path(get, path = "/metrics", tag = "probes",
    responses(
        (status = 200, description = "Prometheus text (passes promtool check metrics).", body = String, content_type = "text/plain"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
async fn metrics(State(admin): State<Arc<Admin>>) -> Response {
    let intake = &admin.intake;
    metrics::gauge!(telemetry::HELD_BYTES).set(intake.budget.held() as f64);
    metrics::gauge!(telemetry::IDEMPOTENCY_KEYS).set(intake.idempotency.count() as f64);
    let (held, ended) = intake.status.counts();
    let bytes = intake.status.bytes();
    metrics::gauge!(telemetry::WEBHOOK_STATUSES, "kind" => "held").set(held as f64);
    metrics::gauge!(telemetry::WEBHOOK_STATUSES, "kind" => "ended").set(ended as f64);
    metrics::gauge!(telemetry::WEBHOOK_STATUS_BYTES).set(bytes as f64);
    let answers = &intake.answers;
    for (status, count) in [
        ("401", &answers.unauthorized_401),
        ("403", &answers.forbidden_403),
    ] {
        metrics::counter!(telemetry::AUTH_REFUSED, "status" => status)
            .absolute(crate::intake::Answers::get(count));
    }
    if let Some(bytes) = crate::heap_bytes() {
        metrics::gauge!(telemetry::HEAP_BYTES).set(bytes as f64);
    }
    let page = admin.prometheus.render();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page).into_response()
}
