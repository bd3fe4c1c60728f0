//! Applications and their endpoints on the admin API.
//!
//! - `GET /v1/applications`, `PUT`, `GET` and `DELETE
//!   /v1/applications/{app}`: an application (one of the sender's
//!   customers) is made, read and deleted; deleting it deletes every
//!   endpoint of it (each drained as a deleted destination is, what is
//!   left dead-lettered).
//! - `GET /v1/applications/{app}/endpoints` and `PUT`, `PATCH`, `GET`,
//!   `DELETE /v1/applications/{app}/endpoints/{name}`: an endpoint is a
//!   destination with an application, so these are the destination routes
//!   for the application's own, with the same guarantees (changes
//!   linearizable, never resurrected, `ETag` and `If-Match`), and the
//!   application from the path. An endpoint's name is unique in the relay
//!   (it is its destination's): one of another application, or a plain
//!   destination, is a 409.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Admin;
use super::change_answers::{precondition, tagged};
use super::destinations::DestinationView;
use crate::catalog::App;
use crate::catalog::edit::app_etag;
use crate::domain::problem::problem;
use crate::domain::schemas::Problem;

/// An application as `PUT` gives it.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApplicationPut {
    /// What it is, for people (at most 1,024 bytes).
    #[schema(example = "Acme Corp", max_length = 1024)]
    description: Option<String>,
}

/// An application as the admin API shows it.
#[derive(Serialize, ToSchema)]
pub(crate) struct ApplicationView {
    /// Its name.
    #[schema(example = "acme")]
    name: String,
    /// What it is, for people.
    description: Option<String>,
    /// Its endpoints.
    endpoints: usize,
}

/// A page of applications.
#[derive(Serialize, ToSchema)]
pub(crate) struct ApplicationList {
    /// By name.
    applications: Vec<ApplicationView>,
    /// Where the next page starts (`cursor`); `null` on the last.
    next_cursor: Option<String>,
}

/// A page of an application's endpoints.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndpointList {
    /// By name.
    endpoints: Vec<DestinationView>,
    /// Where the next page starts (`cursor`); `null` on the last.
    next_cursor: Option<String>,
}

fn bad_name(name: &str) -> Option<Response> {
    (!crate::config::path_name(name)).then(|| {
        problem(
            StatusCode::BAD_REQUEST,
            "bad-name",
            format!("{name:?}: a name is 1 to 64 of A-Z a-z 0-9 . _ -, other than . and .."),
            Vec::new(),
        )
    })
}

impl Admin {
    fn app_view(&self, name: &str, app: App) -> ApplicationView {
        ApplicationView {
            name: name.to_owned(),
            description: app.description,
            endpoints: self.catalog.endpoints_of(name).len(),
        }
    }
}

/// `GET /v1/applications`.
#[utoipa::path(get, path = "/v1/applications", tag = "events", operation_id = "list_applications",
    security(("admin_token" = [])),
    params(
        ("limit" = Option<u32>, Query, description = "Applications in the page (default and most 1000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$", nullable = false, description = "Where to start: a next_cursor an earlier page gave."),
    ),
    responses(
        (status = 200, description = "A page of applications, by name.", body = ApplicationList),
        (status = 400, description = "A limit that is not a number from 1 to 1000, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor that is not a name (bad-cursor), as every listing answers a cursor it did not give.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(State(admin): State<Arc<Admin>>, RawQuery(raw): RawQuery) -> Response {
    let q = match super::paging::parse(raw.as_deref(), 1000, 1000, &[]) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    if q.cursor
        .as_deref()
        .is_some_and(|c| !crate::config::valid_name(c))
    {
        return super::paging::bad_cursor();
    }
    let (page, next) = admin.catalog.apps_page(q.cursor.as_deref(), q.limit);
    let applications = page
        .into_iter()
        .map(|(n, a)| admin.app_view(&n, a))
        .collect();
    Json(ApplicationList {
        applications,
        next_cursor: next,
    })
    .into_response()
}

/// `GET /v1/applications/{app}`.
#[utoipa::path(get, path = "/v1/applications/{app}", tag = "events", operation_id = "get_application",
    security(("admin_token" = [])),
    params(("app" = String, Path, description = "The application.")),
    responses(
        (status = 200, description = "The application.", body = ApplicationView,
            headers(("ETag" = String, description = "Its entity tag: give it as If-Match to change or delete it only if nobody else did meanwhile."))),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn one(State(admin): State<Arc<Admin>>, Path(app): Path<String>) -> Response {
    match admin.catalog.app(&app) {
        Some(a) => {
            let tag = app_etag(&a);
            tagged(Json(admin.app_view(&app, a)).into_response(), &tag)
        }
        None => super::change_answers::unknown_application(),
    }
}

/// `PUT /v1/applications/{app}`.
#[utoipa::path(put, path = "/v1/applications/{app}", tag = "events", operation_id = "put_application",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application: 1 to 64 of A-Z a-z 0-9 . _ -, other than . and ..", pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$"),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Change it only if its ETag is one of these."),
        ("If-None-Match" = Option<String>, Header, pattern = "^ *\\*? *$", nullable = false, description = "`*`: make it only if it does not exist (empty: no condition)."),
    ),
    request_body(content = Option<ApplicationPut>, content_type = "application/json", description = "Optional: no body makes an application with no description."),
    responses(
        (status = 200, description = "Changed.", body = ApplicationView,
            headers(("ETag" = String, description = "Its entity tag now."))),
        (status = 201, description = "Made.", body = ApplicationView,
            headers(("ETag" = String, description = "Its entity tag."))),
        (status = 400, description = "Not a name, a body that is not JSON, or If-Match or If-None-Match that does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no registry (no_journal without state_dir), or (with queue = redis) the application is being deleted (application-deleting: a deletion cut short ends with its DELETE again).", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match or If-None-Match does not hold: it was changed, made or deleted meanwhile (nothing changed).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not an application (an unknown field, a description over 1,024 bytes).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn put(
    State(admin): State<Arc<Admin>>,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(r) = bad_name(&app) {
        return r;
    }
    let pre = match precondition(&headers) {
        Ok(pre) => pre,
        Err(refused) => return *refused,
    };
    let body = match super::change_answers::read_body(body) {
        Ok(b) => b,
        Err(refused) => return *refused,
    };
    let given: ApplicationPut = match body.is_empty() {
        true => ApplicationPut::default(),
        false => match serde_json::from_slice::<serde_json::Value>(&body) {
            Err(e) => {
                return problem(
                    StatusCode::BAD_REQUEST,
                    "bad-json",
                    format!("the body is not JSON: {e}"),
                    Vec::new(),
                );
            }
            Ok(serde_json::Value::Null) => ApplicationPut::default(),
            Ok(v) if !v.is_object() => {
                return problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "bad-application",
                    "an application is a JSON object".to_owned(),
                    Vec::new(),
                );
            }
            Ok(v) => match serde_json::from_value(v) {
                Ok(p) => p,
                Err(e) => {
                    return problem(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "bad-application",
                        e.to_string(),
                        Vec::new(),
                    );
                }
            },
        },
    };
    if given.description.as_ref().is_some_and(|d| d.len() > 1024) {
        return problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad-application",
            "description: at most 1,024 bytes".into(),
            Vec::new(),
        );
    }
    let app_record = App::new(
        given.description,
        admin.queue.events().fresh_since(&app).await,
    );
    match admin.queue.events().put_app(&app, app_record, &pre).await {
        Ok((made, kept)) => {
            let status = if made {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let tag = app_etag(&kept);
            tagged(
                (status, Json(admin.app_view(&app, kept))).into_response(),
                &tag,
            )
        }
        Err(refused) => super::change_answers::refusal(refused),
    }
}

/// What a deletion of an application did.
#[derive(Serialize, ToSchema)]
pub(crate) struct ApplicationDeleted {
    /// Its name.
    name: String,
    /// Its endpoints deleted with it (each drained within the shutdown
    /// grace, the rest dead-lettered with reason `application-deleted`).
    endpoints: usize,
}

/// `DELETE /v1/applications/{app}`.
#[utoipa::path(delete, path = "/v1/applications/{app}", tag = "events", operation_id = "delete_application",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Delete it only if its ETag is one of these."),
    ),
    responses(
        (status = 200, description = "Deleted, with its endpoints: no endpoint of it is made meanwhile (an endpoint's PUT racing it is 404 or deleted with it).", body = ApplicationDeleted),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "An If-Match that does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The relay has no registry (no_journal without state_dir), or (with queue = redis) the application was made again while this deletion went on (application-changed: another relay ended it first).", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match does not hold: it was changed, made again or deleted meanwhile (nothing deleted).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry (with queue = redis: Redis) cannot be written or read whole (a fleet's deletion stays marked: DELETE it again), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn delete(
    State(admin): State<Arc<Admin>>,
    Path(app): Path<String>,
    headers: HeaderMap,
) -> Response {
    let pre = match precondition(&headers) {
        Ok(pre) => pre,
        Err(refused) => return *refused,
    };
    // The engine decides what is there (with queue = redis, a deletion
    // another relay cut short is ended here).
    match admin.queue.events().delete_app(&app, &pre).await {
        Ok(endpoints) => Json(ApplicationDeleted {
            name: app,
            endpoints,
        })
        .into_response(),
        Err(refused) => super::change_answers::refusal(refused),
    }
}

/// Whether destination `name` is an endpoint of `app`: `Err` the answer
/// when it is another's (409) or `app` does not exist (404); `Ok(false)`
/// when there is no destination of that name.
fn owned(admin: &Admin, app: &str, name: &str) -> Result<bool, Box<Response>> {
    if admin.catalog.app(app).is_none() {
        return Err(Box::new(super::change_answers::unknown_application()));
    }
    match admin.catalog.get(name) {
        None => Ok(false),
        Some(l) => match &l.dest.endpoint {
            Some(e) if &*e.application == app => Ok(true),
            _ => Err(Box::new(problem(
                StatusCode::CONFLICT,
                "not-this-application",
                "a destination of that name exists and is not an endpoint of this application \
                 (names are unique in the relay)"
                    .into(),
                Vec::new(),
            ))),
        },
    }
}

/// `body` with `application` set to `app` (one given that is not `app`:
/// 422).
fn with_app(app: &str, body: &Bytes) -> Result<Bytes, Box<Response>> {
    let mut v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        // Left to the destination route, which answers it.
        Err(_) => return Ok(body.clone()),
    };
    if let Some(obj) = v.as_object_mut() {
        match obj.get("application") {
            Some(serde_json::Value::String(a)) if a == app => {}
            None => {
                obj.insert(
                    "application".into(),
                    serde_json::Value::String(app.to_owned()),
                );
            }
            Some(_) => {
                return Err(Box::new(problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "bad-destination",
                    "application: the path gives it; a body that names another is refused".into(),
                    Vec::new(),
                )));
            }
        }
    }
    Ok(serde_json::to_vec(&v).unwrap_or_default().into())
}

/// `GET /v1/applications/{app}/endpoints`.
#[utoipa::path(get, path = "/v1/applications/{app}/endpoints", tag = "events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("limit" = Option<u32>, Query, description = "Endpoints in the page (default and most 1000).", minimum = 1, maximum = 1000),
        ("cursor" = Option<String>, Query, pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$", nullable = false, description = "Where to start: a next_cursor an earlier page gave."),
    ),
    responses(
        (status = 200, description = "A page of the application's endpoints, by name.", body = EndpointList),
        (status = 400, description = "A limit that is not a number from 1 to 1000, or a parameter given twice.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A cursor that is not a name (bad-cursor), as every listing answers a cursor it did not give.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn endpoints(
    State(admin): State<Arc<Admin>>,
    Path(app): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    if admin.catalog.app(&app).is_none() {
        return super::change_answers::unknown_application();
    }
    let q = match super::paging::parse(raw.as_deref(), 1000, 1000, &[]) {
        Ok(q) => q,
        Err(r) => return *r,
    };
    if q.cursor
        .as_deref()
        .is_some_and(|c| !crate::config::valid_name(c))
    {
        return super::paging::bad_cursor();
    }
    let (page, next) = admin
        .catalog
        .endpoints_page(&app, q.cursor.as_deref(), q.limit);
    let mut endpoints = Vec::with_capacity(page.len());
    for listed in page {
        let live = admin.queue.live(&listed.dest.name).await;
        let last_error = admin.errors.last(&listed.dest.name);
        endpoints.push(admin.defaults.view(&listed, live, last_error));
    }
    Json(EndpointList {
        endpoints,
        next_cursor: next,
    })
    .into_response()
}

/// `GET /v1/applications/{app}/endpoints/{name}`.
#[utoipa::path(get, path = "/v1/applications/{app}/endpoints/{name}", tag = "events",
    security(("admin_token" = [])),
    params(("app" = String, Path, description = "The application."), ("name" = String, Path, description = "The endpoint.")),
    responses(
        (status = 200, description = "The endpoint, without its secret.", body = DestinationView,
            headers(("ETag" = String, description = "Its entity tag, for If-Match."))),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application, or no endpoint of that name in it.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A destination of that name is not this application's.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn endpoint(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
) -> Response {
    match owned(&admin, &app, &name) {
        Err(r) => *r,
        Ok(false) => super::change_answers::unknown_destination(),
        Ok(true) => super::destinations::one(State(admin), Path(name)).await,
    }
}

/// `PUT /v1/applications/{app}/endpoints/{name}`.
#[utoipa::path(put, path = "/v1/applications/{app}/endpoints/{name}", tag = "events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("name" = String, Path, description = "The endpoint: 1 to 64 of A-Z a-z 0-9 . _ -, other than . and .., unique in the relay.", pattern = "^([A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\\.\\.[A-Za-z0-9._-]{1,62})$"),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Change it only if its ETag is one of these (or *: only if it exists)."),
        ("If-None-Match" = Option<String>, Header, pattern = "^ *\\*? *$", nullable = false, description = "*: make it only if it does not exist."),
    ),
    request_body(content = super::change::DestinationPut, content_type = "application/json",
        description = "The endpoint whole, as a destination's PUT gives it (application: the path's, or left out)."),
    responses(
        (status = 200, description = "Changed.", body = DestinationView),
        (status = 201, description = "Made.", body = DestinationView),
        (status = 400, description = "An application's name that is not one (bad-application), a body that is not JSON, or an If-Match or If-None-Match that does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No application of that name.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A destination of that name is not this application's, it is being deleted, or the relay has no registry.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match or If-None-Match did not hold.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not an endpoint: its name is not one, a field refused (the detail names each), or another application named (bad-destination).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn put_endpoint(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(r) = owned(&admin, &app, &name) {
        return *r;
    }
    let body = match body.map(|b| with_app(&app, &b)) {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(r)) => return *r,
        Err(e) => Err(e),
    };
    super::change::put_as(admin, name, headers, body).await
}

/// `PATCH /v1/applications/{app}/endpoints/{name}`.
#[utoipa::path(patch, path = "/v1/applications/{app}/endpoints/{name}", tag = "events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("name" = String, Path, description = "The endpoint."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Change it only if its ETag is one of these."),
    ),
    request_body(content = super::change::DestinationPatch, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Changed.", body = DestinationView),
        (status = 400, description = "A body that is not JSON, or an If-Match that does not read.", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application, or no endpoint of that name in it.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A destination of that name is not this application's, it is being deleted, or the relay has no registry.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match did not hold.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field refused (the detail names each).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry cannot be written (nothing changed), the relay is shutting down, or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn patch_endpoint(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match owned(&admin, &app, &name) {
        Err(r) => *r,
        Ok(false) => super::change_answers::unknown_destination(),
        Ok(true) => super::change::patch(State(admin), Path(name), headers, body).await,
    }
}

/// `DELETE /v1/applications/{app}/endpoints/{name}`.
#[utoipa::path(delete, path = "/v1/applications/{app}/endpoints/{name}", tag = "events",
    security(("admin_token" = [])),
    params(
        ("app" = String, Path, description = "The application."),
        ("name" = String, Path, description = "The endpoint."),
        ("If-Match" = Option<String>, Header, pattern = "^ *(\\*|(W/)?\"[!#-+\\--~]*\"( *, *(W/)?\"[!#-+\\--~]*\")*)? *$", nullable = false, description = "Delete it only if its ETag is one of these."),
    ),
    responses(
        (status = 202, description = "Closed to new events at once; what it holds is delivered within the shutdown grace, then dead-lettered.", body = crate::domain::schemas::Deleting),
        (status = 401, description = "No admin token, or not the admin token.", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"dripfeed-relay\"`"))),
        (status = 403, description = "Without an admin token, a request that names the listener by a host name other than localhost (not-local: DNS rebinding).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application, or no endpoint of that name in it.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A destination of that name is not this application's, or the relay has no registry.", body = Problem, content_type = "application/problem+json"),
        (status = 412, description = "If-Match did not hold.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The registry cannot be written (nothing changed), or the listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn delete_endpoint(
    State(admin): State<Arc<Admin>>,
    Path((app, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match owned(&admin, &app, &name) {
        Err(r) => *r,
        Ok(false) => super::change_answers::unknown_destination(),
        Ok(true) => super::change::delete(State(admin), Path(name), headers).await,
    }
}
