//! `PUT /v1/destinations/{name}` and `DELETE /v1/destinations/{name}`:
//! destinations made, changed and deleted while webhooks flow.
//!
//! - `PUT` makes the destination or replaces it whole (a field left out
//!   goes back to its setting; a secret left out of a destination that
//!   has one is a 422: `null` removes it), checked as
//!   the configuration is checked (the address guard among it): 201 when
//!   made, 200 when changed, 422 with what is wrong. A new rate, ceiling or
//!   budget applies at once to an active destination whose ring holds a
//!   full budget at it (else 422, nothing changed); the URL and secrets
//!   apply from the next attempt. A destination made here is named (its own
//!   metric labels) and counts in `max_destinations`.
//! - `PATCH` changes what a JSON merge patch (RFC 7396) names and nothing
//!   else: `null` removes a field (a secret: no signing).
//! - `DELETE` closes it to new webhooks at once (404 from then), lets it
//!   deliver what it holds within the shutdown grace, then dead-letters the
//!   rest: never lost. It answers 202 with what it still held.
//!
//! The queue makes the change: with the local engine it is written to the
//! state file before the answer, so a restart keeps it (without a state
//! file, `no_journal` without `state_dir`, both answer 409); with `queue =
//! redis` it is the fleet's, written to Redis and applied by every relay
//! within a second. Once shutdown has begun, 503. Both check the
//! destination's limits as its configuration is checked
//! ([`crate::domain::limits`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::Admin;
use super::change_answers::{refusal, unprocessable};
use crate::config::{Fields, valid_name};
use crate::domain::problem::problem;
use crate::domain::schemas::{Deleting, Problem};
use crate::queue::Put;

/// A destination as `PUT` gives it: the whole of it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DestinationPut {
    /// Where its webhooks are POSTed: `http://` or `https://`, at an
    /// address the allow list lets deliveries reach.
    #[schema(example = "https://billing.example.com/hooks")]
    url: String,
    /// Its drain rate, webhooks/s (absent: `drain_rate`).
    #[schema(exclusive_minimum = 0.0)]
    rate: Option<f64>,
    /// Its highest rate, webhooks/s (the AIMD ceiling when adaptive).
    #[schema(exclusive_minimum = 0.0)]
    ceiling: Option<f64>,
    /// Its latency budget, e.g. `"2s"` (absent: `latency_budget`).
    #[schema(example = "2s")]
    budget: Option<String>,
    /// A Standard Webhooks signing secret, `whsec_` + base64 (not empty).
    /// Left out on a destination that signs, the `PUT` is refused (422):
    /// give it again, or `null` to stop signing.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable = true, pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$")]
    secret: Option<Option<String>>,
    /// The secret being replaced (needs `secret`): each delivery is signed
    /// with both. Left out while the destination has one, the `PUT` is
    /// refused (422): give it again, or `null` to end the change of secret.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable = true, pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$")]
    previous_secret: Option<Option<String>>,
}

/// A field given (`Some`, `null` as `Some(None)`) or left out (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A JSON merge patch (RFC 7396) of a destination: each field given
/// replaces its value, `null` removes it (back to the setting; for a
/// secret, no signing); a field left out stays as it is.
#[derive(ToSchema)]
#[allow(dead_code)] // Described, not built: the patch is read as JSON.
pub struct DestinationPatch {
    /// Where its webhooks are POSTed (cannot be removed).
    #[schema(example = "https://billing.example.com/hooks")]
    url: Option<String>,
    /// Its drain rate, webhooks/s.
    #[schema(exclusive_minimum = 0.0, nullable = true)]
    rate: Option<f64>,
    /// Its highest rate, webhooks/s.
    #[schema(exclusive_minimum = 0.0, nullable = true)]
    ceiling: Option<f64>,
    /// Its latency budget, e.g. `"2s"`.
    #[schema(example = "2s", nullable = true)]
    budget: Option<String>,
    /// Its signing secret, `whsec_` + base64; `null`: no signing.
    #[schema(
        nullable = true,
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    secret: Option<String>,
    /// The secret being replaced; `null`: the change of secret is over.
    #[schema(
        nullable = true,
        pattern = "^(whsec_)?(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)?|[A-Za-z0-9+/]{2}(==)?|[A-Za-z0-9+/]{3}=?)$"
    )]
    previous_secret: Option<String>,
}

/// The body as JSON, or its 400.
fn json_of(body: &[u8]) -> Result<serde_json::Value, Box<Response>> {
    serde_json::from_slice::<serde_json::Value>(body).map_err(|e| {
        let detail = format!("the body is not JSON: {e}");
        Box::new(problem(
            StatusCode::BAD_REQUEST,
            "bad-json",
            detail,
            Vec::new(),
        ))
    })
}

/// A name that cannot be a destination's: 422.
fn bad_name(name: &str) -> Option<Response> {
    (!valid_name(name)).then(|| {
        let detail = "a destination name is 1 to 64 of A-Z a-z 0-9 . _ -".to_owned();
        unprocessable("bad-destination", detail)
    })
}

/// `PUT /v1/destinations/{name}`.
#[utoipa::path(put, path = "/v1/destinations/{name}", tag = "admin",
    security(("admin_token" = [])),
    params(("name" = String, Path, pattern = "^[A-Za-z0-9._-]{1,64}$", description = "The destination's name: 1 to 64 of `A-Z a-z 0-9 . _ -`.")),
    request_body(content = DestinationPut, content_type = "application/json"),
    responses(
        (status = 200, description = "Changed: its view, without secrets.", body = super::destinations::DestinationView),
        (status = 201, description = "Made: its view, without secrets.", body = super::destinations::DestinationView),
        (status = 400, description = "The body is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It is being deleted (with queue = redis: until the fleet has ended it, its grace and 5 s), an older destination of that name is still draining, the relay has no state file, or (with queue = redis) another relay changed it meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A bad name, field or address, a rate its ring cannot hold, max_destinations reached, or a secret left out of a destination that has one (give it, or null to stop signing).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The state file (with queue = redis: Redis) cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(refused) = bad_name(&name) {
        return refused;
    }
    let given: DestinationPut = match json_of(&body).map(serde_json::from_value) {
        Err(refused) => return *refused,
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return unprocessable("bad-destination", format!("the body does not read: {e}"));
        }
    };
    // A secret is never dropped by leaving it out: null says so.
    if let Some(now) = admin.catalog.get(&name).filter(|l| l.open) {
        for (field, has, given) in [
            ("secret", now.dest.secret.is_some(), &given.secret),
            (
                "previous_secret",
                now.dest.previous_secret.is_some(),
                &given.previous_secret,
            ),
        ] {
            if has && given.is_none() {
                let detail = format!(
                    "{field}: the destination has one and the PUT leaves it out; give it again \
                     (a PUT replaces the whole destination), or \"{field}\": null to remove it, \
                     or PATCH only what changes"
                );
                return unprocessable("secret-left-out", detail);
            }
        }
    }
    let fields = Fields {
        name: Some(name.clone()),
        url: Some(given.url),
        rate: given.rate,
        ceiling: given.ceiling,
        budget: given.budget,
        secret: given.secret.flatten(),
        previous_secret: given.previous_secret.flatten(),
    };
    change(&admin, &name, fields).await
}

/// `PATCH /v1/destinations/{name}`.
#[utoipa::path(patch, path = "/v1/destinations/{name}", tag = "admin",
    security(("admin_token" = [])),
    params(("name" = String, Path, pattern = "^[A-Za-z0-9._-]{1,64}$", description = "The destination's name.")),
    request_body(content = DestinationPatch, content_type = "application/merge-patch+json",
        description = "A JSON merge patch (RFC 7396): what it names changes, null removes, the rest stays. application/json is taken too."),
    responses(
        (status = 200, description = "Changed: its view, without secrets.", body = super::destinations::DestinationView),
        (status = 400, description = "The body is not JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It is being deleted, the relay has no state file, or (with queue = redis) another relay changed it meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a JSON object, an unknown field, url removed, or the destination it makes is refused as a PUT's would be.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The state file (with queue = redis: Redis) cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn patch(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(refused) = bad_name(&name) {
        return refused;
    }
    let patch = match json_of(&body) {
        Err(refused) => return *refused,
        Ok(serde_json::Value::Object(p)) => p,
        Ok(_) => {
            return unprocessable("bad-destination", "a merge patch is a JSON object".into());
        }
    };
    let Some(now) = admin.catalog.get(&name).filter(|l| l.open) else {
        return super::change_answers::unknown_destination();
    };
    let mut fields = now.dest.fields();
    match merge(&mut fields, patch) {
        Ok(()) => change(&admin, &name, fields).await,
        Err(detail) => unprocessable("bad-destination", detail),
    }
}

/// `patch` merged into `fields` (RFC 7396), or what is wrong with it.
fn merge(
    fields: &mut Fields,
    patch: serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    use serde_json::Value;
    let text = |k: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(format!("{k}: a string or null")),
    };
    let number = |k: &str, v: Value| match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_f64().map(Some).ok_or_else(|| format!("{k}: a number")),
        _ => Err(format!("{k}: a number or null")),
    };
    for (k, v) in patch {
        match k.as_str() {
            "url" => match text("url", v)? {
                Some(url) => fields.url = Some(url),
                None => return Err("url: cannot be removed".into()),
            },
            "rate" => fields.rate = number("rate", v)?,
            "ceiling" => fields.ceiling = number("ceiling", v)?,
            "budget" => fields.budget = text("budget", v)?,
            "secret" => fields.secret = text("secret", v)?,
            "previous_secret" => fields.previous_secret = text("previous_secret", v)?,
            other => return Err(format!("{other}: not a destination's field")),
        }
    }
    Ok(())
}

/// A destination made or changed to `fields`: checked as the
/// configuration is (its fields, its limits, its address), then asked of
/// the queue; its view, or the refusal.
async fn change(admin: &Admin, name: &str, fields: Fields) -> Response {
    if admin.catalog.is_closing() {
        return refusal(crate::queue::ChangeRefused::closing());
    }
    let dest = match fields.clone().check_body(&admin.origin) {
        Ok(dest) => dest,
        Err(detail) => return unprocessable("bad-destination", detail),
    };
    // The limits a configured destination is held to (domain::limits).
    if let Err(detail) = admin.queue.limits().check(&dest) {
        return unprocessable("bad-destination", detail);
    }
    // Before the queue's turn: a name's lookup may take seconds.
    if let Err(refused) = admin
        .guard
        .check_destination(&dest.url, admin.resolve)
        .await
    {
        let detail = format!(
            "{}: {refused}: allow it with --allow-destination-cidr {} (allow_destination_cidrs)",
            dest.url, refused.net
        );
        return unprocessable("private-destination", detail);
    }
    let put = match admin.queue.put(name, fields, dest).await {
        Ok(put) => put,
        Err(refused) => return refusal(refused),
    };
    let Some(view) = admin.view(name).await else {
        return refusal(crate::queue::ChangeRefused::unknown());
    };
    let status = match put {
        Put::Made => StatusCode::CREATED,
        Put::Changed => StatusCode::OK,
    };
    (status, Json(view)).into_response()
}

/// `DELETE /v1/destinations/{name}`.
#[utoipa::path(delete, path = "/v1/destinations/{name}", tag = "admin",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The destination's name.")),
    responses(
        (status = 202, description = "Closed to new webhooks; what it holds is delivered within the grace, then dead-lettered.", body = Deleting),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Sent by a browser from another origin (Origin is not this listener's: cross-origin), or, without an admin token, naming the listener by a host name other than localhost (not-local).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No destination of that name (or it is already being deleted).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no state file, or (with queue = redis) another relay changed it meanwhile.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The state file (with queue = redis: Redis) cannot be written (nothing changed), or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn delete(State(admin): State<Arc<Admin>>, Path(name): Path<String>) -> Response {
    match admin.queue.delete(&name).await {
        Ok(body) => {
            admin.errors.forget(&name);
            admin.recents.forget(&name);
            (StatusCode::ACCEPTED, Json(body)).into_response()
        }
        Err(refused) => refusal(refused),
    }
}
