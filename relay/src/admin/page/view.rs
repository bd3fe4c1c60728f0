//! `GET /v1/status`: what the status page shows, as JSON (the page polls
//! it): each destination's queue against its bound, its configured rate and
//! the rate in force (with the AIMD bounds), this relay's recent p99
//! against the target, deliveries running, its breaker, its counts and its
//! last delivery error; and whether the relay is ready.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
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
    /// The destinations the relay holds.
    pub held: usize,
    /// Which are shown: `all` (every one, in configuration order, when
    /// there are at most 50), `busiest` (50: those holding the most
    /// webhooks, most first, then the first in configuration order) or
    /// `found` (those whose names contain `find`, at most 50).
    pub shown: &'static str,
    /// The destinations shown.
    pub destinations: Vec<DestinationStatus>,
}

/// The most destinations the page (and `GET /v1/status`) shows at once.
pub(crate) const SHOWN: usize = 50;

/// `find=TEXT` of a query, if given (and not blank).
pub(crate) fn find_in(raw: Option<&str>) -> Option<String> {
    form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "find")
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
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
    params(
        ("find" = Option<String>, Query, description = "Only the destinations whose names contain this, in any case (at most 50)."),
    ),
    responses(
        (status = 200, description = "The relay now, as the status page shows it.", body = StatusPage),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn status(
    State(admin): State<Arc<Admin>>,
    RawQuery(raw): RawQuery,
) -> Json<StatusPage> {
    Json(now(&admin, find_in(raw.as_deref()).as_deref()).await)
}

/// At most `most` destinations of `catalog` to show: every one while
/// there are no more ("all"), else the busiest in `queue`, then (when
/// fewer hold anything) the first in listing order, so none is empty
/// ("busiest"). The status page and the status line show these.
pub(crate) fn shown(
    queue: &dyn crate::queue::Queue,
    catalog: &crate::catalog::Catalog,
    most: usize,
) -> (&'static str, Vec<crate::catalog::Listed>) {
    if catalog.held() <= most {
        return ("all", catalog.list());
    }
    let mut picked: Vec<_> = queue
        .busiest(most)
        .into_iter()
        .filter_map(|(name, _)| catalog.get(&name))
        .collect();
    for listed in catalog.page(None, most).listed {
        if picked.len() >= most {
            break;
        }
        if !picked.iter().any(|p| p.dest.name == listed.dest.name) {
            picked.push(listed);
        }
    }
    ("busiest", picked)
}

/// The relay now: every destination, the busiest, or those `find` names
/// (at most [`SHOWN`]).
pub(crate) async fn now(admin: &Admin, find: Option<&str>) -> StatusPage {
    let down = admin.queue.down().await;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let held = admin.catalog.held();
    let (shown, picked) = match find {
        Some(text) => ("found", admin.catalog.find(text, SHOWN)),
        None => shown(admin.queue.as_ref(), &admin.catalog, SHOWN),
    };
    let mut destinations = Vec::new();
    for listed in picked {
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
        held,
        shown,
        down: down
            .into_iter()
            .map(|(name, detail)| Down { name, detail })
            .collect(),
        destinations,
    }
}
