//! `GET /v1/destinations` and `GET /v1/destinations/{name}`: each
//! destination as configured (url, rate, ceiling, budget, whether a secret
//! is set — never the secret — and where each came from) beside its live
//! state (rate now, depth, capacity, in flight, breaker, counts).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dripfeed::destinations::DestinationStats;
use serde_json::{Value, json};

use super::Admin;
use crate::config::{Config, Destination};
use crate::intake::problem::problem;

/// A destination as configured, secrets left out.
#[derive(Clone, Debug)]
pub struct Configured {
    name: String,
    url: String,
    rate: f64,
    ceiling: Option<f64>,
    budget: Duration,
    secret_set: bool,
    origin: String,
}

impl Configured {
    /// Every destination of `cfg`, its rate and budget as in force.
    pub fn all(cfg: &Config) -> Vec<Configured> {
        let s = &cfg.settings;
        let one = |d: &Destination| Configured {
            name: d.name.clone(),
            url: d.url.as_str().to_owned(),
            rate: d.rate.unwrap_or(s.drain_rate),
            ceiling: d.ceiling.or(s.adaptive.then_some(s.ceiling)),
            budget: d.budget.unwrap_or(s.latency_budget),
            secret_set: d.secret.is_some(),
            origin: d.origin.to_string(),
        };
        cfg.destinations.iter().map(one).collect()
    }

    /// Its JSON, with `live` state if the set has it.
    fn json(&self, live: Option<&DestinationStats>) -> Value {
        let mut v = json!({
            "name": self.name,
            "url": self.url,
            "rate": self.rate,
            "ceiling": self.ceiling,
            "budget_ms": u64::try_from(self.budget.as_millis()).unwrap_or(u64::MAX),
            "secret_set": self.secret_set,
            "origin": self.origin,
        });
        if let (Some(s), Some(obj)) = (live, v.as_object_mut()) {
            obj.insert(
                "live".into(),
                json!({
                    "active": s.is_active(),
                    "rate_now": s.drain_rate(),
                    "depth": s.depth(),
                    "capacity": s.capacity(),
                    "in_flight": s.in_flight(),
                    "breaker": s.breaker().as_str(),
                    "accepted": s.accepted(),
                    "refused": s.refused(),
                    "delivered": s.delivered(),
                    "dead_lettered": s.dead_lettered() + s.evicted(),
                }),
            );
        }
        v
    }
}

/// The live state of every destination, by name.
fn live(admin: &Admin) -> Vec<DestinationStats> {
    admin.intake.set.all_stats()
}

/// `GET /v1/destinations`.
pub async fn list(State(admin): State<Arc<Admin>>) -> Response {
    let stats = live(&admin);
    let all: Vec<Value> = admin
        .configured
        .iter()
        .map(|c| c.json(stats.iter().find(|s| s.name() == c.name)))
        .collect();
    Json(json!({ "destinations": all })).into_response()
}

/// `GET /v1/destinations/{name}`.
pub async fn one(State(admin): State<Arc<Admin>>, Path(name): Path<String>) -> Response {
    let Some(c) = admin.configured.iter().find(|c| c.name == name) else {
        let detail = "no destination of that name is configured".to_owned();
        return problem(
            StatusCode::NOT_FOUND,
            "unknown-destination",
            detail,
            Vec::new(),
        );
    };
    let stats = live(&admin);
    Json(c.json(stats.iter().find(|s| s.name() == c.name))).into_response()
}
