//! `GET /v1/status`: what the status page shows, as JSON (the page polls
//! it): each destination's queue against its bound, its configured rate and
//! the rate in force (with the AIMD bounds), this relay's recent p99
//! against the target, deliveries running, its breaker, its counts and its
//! last delivery error; and whether the relay is ready.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::admin::Admin;
use crate::deliver::errors::LastError;
use crate::domain::schemas::Problem;

/// The relay now.
#[derive(Serialize, ToSchema, Debug, Clone)]
pub(crate) struct StatusPage {
    /// `local` (this relay's queue and journal) or `redis` (the fleet's
    /// queue: depths, bounds and counts are the fleet's).
    pub queue: &'static str,
    /// Whether a webhook taken now can be kept (`/readyz`).
    pub ready: bool,
    /// What is down when not ready: `journal`, `dead-letter`, `redis`,
    /// `redis_durability`, `postgres`, each with why.
    pub down: Vec<Down>,
    /// Every destination, in configuration order.
    pub destinations: Vec<DestinationStatus>,
}

/// A part that is down.
#[derive(Serialize, ToSchema, Debug, Clone)]
pub(crate) struct Down {
    /// The part.
    pub name: &'static str,
    /// Why.
    pub detail: String,
}

/// One destination now.
#[derive(Serialize, ToSchema, Debug, Clone)]
pub(crate) struct DestinationStatus {
    /// Its name.
    pub name: String,
    /// Webhooks queued (with `queue = redis`, the fleet's).
    pub depth: u64,
    /// Webhooks it may queue (budget × rate).
    pub capacity: u64,
    /// Its configured rate, webhooks/s.
    pub rate: f64,
    /// The rate in force, webhooks/s (AIMD moves it when adaptive).
    pub rate_now: f64,
    /// Whether its rate follows its receiver's p99.
    pub adaptive: bool,
    /// The lowest adaptive rate, when adaptive.
    pub floor: Option<f64>,
    /// The highest adaptive rate, when adaptive.
    pub ceiling: Option<f64>,
    /// This relay's deliveries' p99 over the last 10 to 20 s, ms; `null`
    /// without a recent delivery.
    pub p99_ms: Option<f64>,
    /// The p99 the adaptive drain aims under, ms, when adaptive.
    pub target_p99_ms: Option<f64>,
    /// Deliveries running on this relay.
    pub in_flight: u64,
    /// `closed`, `open` or `half-open`.
    pub breaker: String,
    /// Webhooks admitted.
    pub accepted: u64,
    /// Webhooks refused.
    pub refused: u64,
    /// Webhooks delivered.
    pub delivered: u64,
    /// Webhooks dead-lettered: redrive them with `POST
    /// /v1/dead-letters/redrive`.
    pub dead_lettered: u64,
    /// Its last failed delivery attempt, if any since start.
    pub last_error: Option<LastError>,
}

/// `GET /v1/status`.
#[utoipa::path(get, path = "/v1/status", tag = "admin",
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The relay now, as the status page shows it.", body = StatusPage),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn status(State(admin): State<Arc<Admin>>) -> Json<StatusPage> {
    Json(now(&admin).await)
}

/// The relay now.
pub(crate) async fn now(admin: &Admin) -> StatusPage {
    let down = admin.queue.down().await;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let mut destinations = Vec::new();
    for listed in admin.catalog.list() {
        let dest = &listed.dest;
        let live = admin.queue.live(&dest.name).await.unwrap_or_default();
        let rates = admin.defaults.rates(dest);
        destinations.push(DestinationStatus {
            name: dest.name.clone(),
            depth: live.depth,
            capacity: live.capacity,
            rate: rates.configured,
            rate_now: live.rate_now,
            adaptive: rates.floor.is_some(),
            floor: rates.floor,
            ceiling: rates.ceiling,
            p99_ms: admin.recents.p99(&dest.name).map(ms),
            target_p99_ms: admin.target_p99.map(ms),
            in_flight: live.in_flight,
            breaker: match live.breaker.is_empty() {
                true => "closed".to_owned(),
                false => live.breaker,
            },
            accepted: live.accepted,
            refused: live.refused,
            delivered: live.delivered,
            dead_lettered: live.dead_lettered,
            last_error: admin.errors.last(&dest.name),
        });
    }
    StatusPage {
        queue: if admin.fleet { "redis" } else { "local" },
        ready: down.is_empty(),
        down: down
            .into_iter()
            .map(|(name, detail)| Down { name, detail })
            .collect(),
        destinations,
    }
}
