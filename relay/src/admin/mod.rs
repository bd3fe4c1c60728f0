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
//! - `GET /v1/dead-letters` ([`dead_letters`]): a page of the dead
//!   letters, oldest first, and `POST /v1/dead-letters/redrive`
//!   ([`redrive`]), under the same token.
//!
//! Every route asks the queue ([`crate::queue::Queue`]): the same answers
//! with the local engine and the fleet's.
//!
//! - `GET /` ([`page`]): the status page, live, for a browser (a sign-in
//!   form first when a token is configured), polling `GET /v1/status`.
//!
//! The status line on stdout is [`status`].

pub(crate) mod applications;
pub(crate) mod change;
mod change_answers;
pub(crate) mod dead_letters;
pub(crate) mod destinations;
pub(crate) mod events;
pub(crate) mod page;
pub(crate) mod paging;
pub(crate) mod probes;
pub(crate) mod redrive;
pub(crate) mod status;
pub(crate) mod token;
pub(crate) mod webhooks;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::catalog::Catalog;
use crate::config::digest::KeyDigest;
use crate::domain::schemas::Problem;
use crate::intake::Intake;
use crate::openapi;
use crate::queue::Queue;
use crate::telemetry;

/// What the admin routes read.
pub(crate) struct Admin {
    /// Intake: the byte budget and what it answered.
    pub intake: Arc<Intake>,
    /// The queue, whichever engine keeps it: destinations' live state and
    /// changes, dead letters, statuses, readiness.
    pub queue: Arc<dyn Queue>,
    /// The Prometheus recorder's page.
    pub prometheus: PrometheusHandle,
    /// The admin token's digest; `None`: the routes are open (loopback).
    /// A reload may change it.
    pub token: crate::util::swap::Swap<Option<KeyDigest>>,
    /// The destinations in force: what `/v1/destinations` shows beside
    /// their live state.
    pub catalog: Arc<Catalog>,
    /// What a destination leaves to the settings.
    pub defaults: destinations::Defaults,
    /// The checks a destination made or changed here goes through (its
    /// origin names the registry, or the fleet's map).
    pub vetter: crate::catalog::vet::Vetter,
    /// Each destination's last delivery error.
    pub errors: Arc<crate::deliver::errors::Errors>,
    /// Each destination's recent delivery latencies (the page's p99).
    pub recents: Arc<crate::deliver::recent::Recents>,
    /// The p99 the adaptive drain aims under, when adaptive.
    pub target_p99: Option<std::time::Duration>,
    /// How many of the busiest destinations /metrics names.
    pub metrics_busiest: usize,
    /// Whether the queue is the fleet's (`queue = redis`).
    pub fleet: bool,
    /// The status page's browser sessions.
    pub session: page::session::Session,
}

/// The routes that need the admin token.
fn guarded() -> OpenApiRouter<Arc<Admin>> {
    OpenApiRouter::new()
        .routes(routes!(destinations::list))
        .routes(routes!(
            destinations::one,
            change::put,
            change::patch,
            change::delete
        ))
        .routes(routes!(webhooks::webhook))
        .routes(routes!(applications::list))
        .routes(routes!(
            applications::one,
            applications::put,
            applications::delete
        ))
        .routes(routes!(applications::endpoints))
        .routes(routes!(
            applications::endpoint,
            applications::put_endpoint,
            applications::patch_endpoint,
            applications::delete_endpoint
        ))
        .routes(routes!(events::list))
        .routes(routes!(events::one))
        .routes(routes!(events::resend))
        .routes(routes!(events::attempts))
        .routes(routes!(events::recover))
        .routes(routes!(dead_letters::list))
        .routes(routes!(redrive::redrive))
        .routes(routes!(page::view::status))
}

/// The routes open to anyone who reaches the listener.
fn open() -> OpenApiRouter<Arc<Admin>> {
    OpenApiRouter::new()
        .routes(routes!(metrics))
        .routes(routes!(probes::healthz))
        .routes(routes!(probes::readyz))
}

/// Every admin route, each with its OpenAPI description.
pub(crate) fn routes() -> OpenApiRouter<Arc<Admin>> {
    open().merge(guarded())
}

/// The admin router, serving its document at `/openapi.json`.
pub(crate) fn router(admin: Arc<Admin>) -> Router {
    let guarded = guarded()
        .route_layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            token::require,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(
            change_answers::MAX_BODY,
        ));
    // The status page and its sign-in: for browsers, not in the API's
    // document (GET /v1/status, which the page polls, is).
    let page = OpenApiRouter::new()
        .route("/", axum::routing::get(page::index))
        .route("/sign-in", axum::routing::post(page::sign_in));
    openapi::finish(
        open().merge(guarded).merge(page),
        openapi::Listener::Admin,
        admin,
        &[],
    )
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
    admin.queue.publish().await;
    let answers = &intake.answers;
    for (status, reason, count) in answers.all() {
        metrics::counter!(telemetry::INTAKE_ANSWERS, "status" => status.to_string(), "reason" => reason)
            .absolute(count);
    }
    let down = admin.queue.down().await;
    metrics::gauge!(telemetry::READY).set(if down.is_empty() { 1.0 } else { 0.0 });
    for part in telemetry::PARTS {
        let is_down = down.iter().any(|(name, _)| name == part);
        metrics::gauge!(telemetry::DOWN, "part" => *part).set(f64::from(u8::from(is_down)));
    }
    for listed in admin.catalog.list_own_series() {
        let d = &listed.dest;
        let rates = admin.defaults.rates(d);
        let bounds = [
            ("configured", Some(rates.configured)),
            ("floor", rates.floor),
            ("ceiling", rates.ceiling),
        ];
        for (bound, rate) in bounds {
            if let Some(rate) = rate {
                metrics::gauge!(telemetry::DESTINATION_RATE, "destination" => d.name.clone(), "bound" => bound)
                    .set(rate);
            }
        }
    }
    for (status, count) in [
        ("401", &answers.unauthorized_401),
        ("403", &answers.forbidden_403),
    ] {
        metrics::counter!(telemetry::AUTH_REFUSED, "status" => status)
            .absolute(crate::intake::Answers::get(count));
    }
    if let Some(bytes) = telemetry::heap_bytes() {
        metrics::gauge!(telemetry::HEAP_BYTES).set(bytes as f64);
    }
    let catalog = &admin.catalog;
    let mut page = telemetry::only_held(&admin.prometheus.render(), |name| {
        catalog.has_own_series(name)
    });
    let k = admin.metrics_busiest;
    telemetry::busiest(
        &mut page,
        &admin.queue.busiest(k),
        &admin.errors.most_failing(k, telemetry::FAILING_WITHIN),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page).into_response()
}
