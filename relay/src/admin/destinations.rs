//! `GET /v1/destinations` and `GET /v1/destinations/{name}`: each
//! destination in force (url, rate, ceiling, budget, whether a secret is
//! set — never the secret — and where each came from: a file, a flag, the
//! admin API) beside its live state (rate now, depth, capacity, in flight,
//! breaker, counts). `PUT` and `DELETE` are in [`super::change`].

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::Admin;
use crate::catalog::Listed;
use crate::catalog::edit::etag;
use crate::config::Config;
use crate::deliver::errors::LastError;
use crate::domain::schemas::{Live, Problem};

/// What a destination leaves to the settings: the drain rate, the adaptive
/// ceiling (when adaptive) and the latency budget.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Defaults {
    /// `drain_rate`.
    pub rate: f64,
    /// `ceiling`, when `adaptive`.
    pub ceiling: Option<f64>,
    /// `floor`, when `adaptive`.
    pub floor: Option<f64>,
    /// `latency_budget`.
    pub budget: Duration,
}

/// A destination's rates ([`Defaults::rates`]), webhooks/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rates {
    /// Its configured rate.
    pub configured: f64,
    /// The lowest adaptive rate, when adaptive.
    pub floor: Option<f64>,
    /// The highest adaptive rate, when adaptive.
    pub ceiling: Option<f64>,
}

impl Defaults {
    /// The defaults of `cfg`.
    pub(crate) fn of(cfg: &Config) -> Defaults {
        let s = &cfg.settings;
        Defaults {
            rate: s.drain_rate,
            ceiling: s.adaptive.then_some(s.ceiling),
            floor: s.adaptive.then_some(s.floor),
            budget: s.latency_budget,
        }
    }

    /// `d`'s configured rate and, when adaptive, the AIMD floor and ceiling
    /// its rate in force moves between (what the status page and
    /// `dripfeed_relay_destination_rate` show).
    pub(crate) fn rates(&self, d: &crate::config::Destination) -> Rates {
        Rates {
            configured: d.rate.unwrap_or(self.rate),
            floor: self.floor,
            ceiling: self.ceiling.map(|c| d.ceiling.unwrap_or(c)),
        }
    }

    /// `listed` as the admin API shows it, with its `live` state.
    pub(crate) fn view(
        &self,
        listed: &Listed,
        live: Option<Live>,
        last_error: Option<LastError>,
    ) -> DestinationView {
        let d = &listed.dest;
        DestinationView {
            name: d.name.clone(),
            // A password in the URL is never shown (`***`).
            url: d.url.to_string(),
            rate: d.rate.unwrap_or(self.rate),
            ceiling: d.ceiling.or(self.ceiling),
            budget_ms: u64::try_from(d.budget.unwrap_or(self.budget).as_millis())
                .unwrap_or(u64::MAX),
            secret_set: d.secret.is_some(),
            previous_secret_set: d.previous_secret.is_some(),
            metrics: d.own_series(),
            origin: d.origin.to_string(),
            deleting: !listed.open,
            application: d.endpoint.as_ref().map(|e| e.application.to_string()),
            event_types: d.endpoint.as_ref().map(|e| e.event_types.clone()),
            filter: d.endpoint.as_ref().and_then(|e| e.filter.clone()),
            disabled: d.endpoint.as_ref().map(|e| e.disabled),
            description: d.endpoint.as_ref().and_then(|e| e.description.clone()),
            live,
            last_error,
        }
    }
}

/// A destination as `GET /v1/destinations` shows it (never its secret).
#[derive(Serialize, ToSchema)]
pub(crate) struct DestinationView {
    /// Its name (the destination header's value).
    name: String,
    /// Where its webhooks are delivered (a password in it shown as `***`).
    url: String,
    /// Its drain rate, webhooks/s, as configured.
    rate: f64,
    /// Its adaptive ceiling, webhooks/s, if adaptive.
    ceiling: Option<f64>,
    /// Its latency budget, ms.
    budget_ms: u64,
    /// Whether a signing secret is set (the secret is never shown).
    secret_set: bool,
    /// Whether a previous secret is set: deliveries are signed with both.
    previous_secret_set: bool,
    /// Whether it has its own metric series (label `destination` = its
    /// name) or is summed into `_other`: as its `metrics` field says,
    /// else yes when configured, no when made through the admin API.
    metrics: bool,
    /// Where it was configured (a file and line, a flag, a variable, or
    /// the admin API and its registry).
    origin: String,
    /// Whether it is being deleted: new webhooks get 404, what it holds
    /// is still delivered within the shutdown grace, then dead-lettered.
    deleting: bool,
    /// The application whose endpoint it is; absent: a destination that
    /// takes webhooks by name (`X-Destination`), no event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "acme")]
    application: Option<String>,
    /// An endpoint's event types: exact names and `prefix.*`; empty: every
    /// type.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = json!(["invoice.*"]))]
    event_types: Option<Vec<String>>,
    /// An endpoint's payload filter: each key a field's dotted path, each
    /// value what it must equal.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"status": "paid"}))]
    filter: Option<serde_json::Map<String, serde_json::Value>>,
    /// Whether the endpoint is disabled (it takes no new event).
    #[serde(skip_serializing_if = "Option::is_none")]
    disabled: Option<bool>,
    /// What the endpoint is, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// Its live state: its capacity and rate from the start, busy or idle
    /// (with `queue = redis`, the fleet's depth, bound and counts).
    live: Option<Live>,
    /// Its last failed delivery attempt since the relay started (this
    /// relay's, with `queue = redis`): its kind, what happened, when, and
    /// how many attempts failed.
    last_error: Option<LastError>,
}

/// `GET /v1/destinations`: a page of them.
#[derive(Serialize, ToSchema)]
pub(crate) struct DestinationList {
    /// The destinations, in configuration order, then those made
    /// through the admin API in the order they were made.
    destinations: Vec<DestinationView>,
    /// Where the next page starts: pass it as `cursor`; `null` on the
    /// last page.
    next_cursor: Option<String>,
}

/// Destinations a page holds unless `limit` says.
const DEFAULT_LIMIT: usize = 1000;
/// The most a page holds.
const MAX_LIMIT: usize = 1000;

impl Admin {
    /// `name`'s view, if it is held.
    pub(crate) async fn view(&self, name: &str) -> Option<DestinationView> {
        let listed = self.catalog.get(name)?;
        let live = self.queue.live(name).await;
        Some(self.defaults.view(&listed, live, self.errors.last(name)))
    }

    /// `name`'s view and its `ETag`, of one value: the queue's (the
    /// fleet's, read from Redis). Where this relay's copy is not that value
    /// yet (a change made through another relay, applied here within half
    /// a second), the view shows the queue's, so a client that sends the
    /// tag back with a change has seen what it changes (the body was this
    /// relay's copy and the tag the fleet's: a change made on that tag
    /// undid the other relay's unseen). Untagged while the queue does not
    /// answer.
    pub(crate) async fn tagged_view(
        &self,
        name: &str,
    ) -> Option<(DestinationView, Option<String>)> {
        let listed = self.catalog.get(name)?;
        let (live, current) = tokio::join!(self.queue.live(name), self.queue.current(name));
        let (listed, tag) = match current {
            Ok(Some(fields)) => {
                let tag = etag(&fields);
                if etag(&listed.dest.fields()) == tag {
                    (listed, Some(tag))
                } else {
                    // The fleet's value (this relay's copy is a configured
                    // one, or behind): the fleet's origin.
                    match fields.check_body(&crate::config::Origin::fleet_map()) {
                        Ok(dest) => (
                            Listed {
                                dest,
                                open: listed.open,
                            },
                            Some(tag),
                        ),
                        Err(_) => (listed, None),
                    }
                }
            }
            _ => (listed, None),
        };
        let view = self.defaults.view(&listed, live, self.errors.last(name));
        Some((view, tag))
    }
}

/// `GET /v1/destinations`.
#[utoipa::path(get, path = "/v1/destinations", tag = "admin", operation_id = "list_destinations",
    security(("admin_token" = [])),
    params(
        ("limit" = Option<u32>, Query, description = "Destinations in the page (default and most 1000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^[0-9]{1,20}$", nullable = false, description = "Where to start: a next_cursor an earlier page gave. Absent: the first destination. A destination made after the listing began appears on a later page; one deleted meanwhile is left out."),
    ),
    responses(
        (status = 200, description = "A page of destinations, without secrets.", body = DestinationList),
        (status = 400, description = "A limit that is not a number from 1 to 1000, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor that is not a place in the list (1 to 20 digits).", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(State(admin): State<Arc<Admin>>, RawQuery(raw): RawQuery) -> Response {
    let q = match super::paging::parse(raw.as_deref(), DEFAULT_LIMIT, MAX_LIMIT, &[]) {
        Ok(q) => q,
        Err(resp) => return *resp,
    };
    let after = match super::paging::place(q.cursor.as_deref()) {
        Ok(after) => after,
        Err(resp) => return *resp,
    };
    let page = admin.catalog.page(after, q.limit);
    let mut destinations = Vec::with_capacity(page.listed.len());
    for listed in page.listed {
        let live = admin.queue.live(&listed.dest.name).await;
        let last_error = admin.errors.last(&listed.dest.name);
        destinations.push(admin.defaults.view(&listed, live, last_error));
    }
    Json(DestinationList {
        destinations,
        next_cursor: page.next.map(|n| n.to_string()),
    })
    .into_response()
}

/// `GET /v1/destinations/{name}`.
#[utoipa::path(get, path = "/v1/destinations/{name}", tag = "admin", operation_id = "get_destination",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The destination's name.")),
    responses(
        (status = 200, description = "The destination, without its secret.", body = DestinationView,
            headers(("ETag" = String, description = "Its entity tag: give it as If-Match to change or delete it only if nobody else did meanwhile (absent while the fleet's Redis does not answer)."))),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name is configured.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn one(State(admin): State<Arc<Admin>>, Path(name): Path<String>) -> Response {
    // Its tag as the queue keeps it (the fleet's, read from Redis): what
    // an If-Match is checked against, and the body of the same value.
    match admin.tagged_view(&name).await {
        None => super::change_answers::unknown_destination(),
        Some((view, Some(tag))) => super::change_answers::tagged(Json(view).into_response(), &tag),
        Some((view, None)) => Json(view).into_response(),
    }
}
