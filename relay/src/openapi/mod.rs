//! The OpenAPI 3.1 documents, one per listener, generated from the
//! handlers' `#[utoipa::path]` annotations as the routers register them
//! (`utoipa_axum`'s `routes!`), so a route cannot be served without being
//! described. Each listener serves its own at `GET /openapi.json`; they
//! are checked in at `relay/openapi.json` (intake) and
//! `relay/openapi-admin.json` (admin), and a test fails when either
//! differs from what the code generates (`dripfeed-relay openapi intake >
//! relay/openapi.json` and `dripfeed-relay openapi admin >
//! relay/openapi-admin.json` write them again, as does the test itself
//! under `UPDATE_OPENAPI=1`).
//!
//! The checked-in documents name the headers by their defaults
//! (`X-Destination`, `X-Tenant`); a relay whose `destination_header` or
//! `tenant_header` renames them serves its document with its own names.

use std::sync::Arc;

use axum::extract::Extension;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::schemas::Problem;

/// Which listener a document describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    /// Intake (`listen`).
    Intake,
    /// The admin listener (`admin_listen`).
    Admin,
}

impl Listener {
    /// Its name on the command line.
    pub(crate) fn parse(name: &str) -> Option<Listener> {
        match name {
            "intake" => Some(Listener::Intake),
            "admin" => Some(Listener::Admin),
            _ => None,
        }
    }

    /// Where its document is checked in, under `relay/`.
    #[cfg(test)]
    pub(crate) fn file(self) -> &'static str {
        match self {
            Listener::Intake => "openapi.json",
            Listener::Admin => "openapi-admin.json",
        }
    }
}

/// A listener's document as served.
struct Document(Arc<str>);

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses(
        (status = 200, description = "This listener's OpenAPI 3.1 document.", body = Object, content_type = "application/json"),
        (status = 503, description = "The listener serves its most connections.", body = Problem, content_type = "application/problem+json"),
    ))]
async fn document(Extension(doc): Extension<Arc<Document>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
        .into_response()
}

/// The routes of `listener` made into a router, with `GET /openapi.json`
/// serving their document, its header parameters renamed as `headers`
/// says (default name, configured name): the document served names the
/// headers this relay reads.
pub(crate) fn finish<S>(
    routes: OpenApiRouter<S>,
    listener: Listener,
    state: S,
    headers: &[(&str, &str)],
) -> axum::Router
where
    S: Clone + Send + Sync + 'static,
{
    let (router, mut api) = routes.routes(routes!(document)).split_for_parts();
    describe(&mut api, listener);
    let mut text = render(&api);
    if headers
        .iter()
        .any(|(from, to)| !from.eq_ignore_ascii_case(to))
    {
        text = renamed(&text, headers);
    }
    let doc = Arc::new(Document(Arc::from(text)));
    router
        .with_state(state)
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(Extension(doc))
}

/// At most this much of a request's path is named back in a problem.
const PATH_SHOWN: usize = 200;

/// A path no route serves: a 404 problem, as every refusal is one.
async fn no_route(
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let path: String = uri.path().chars().take(PATH_SHOWN).collect();
    let resp = crate::domain::problem::problem(
        axum::http::StatusCode::NOT_FOUND,
        "not-found",
        format!("no route serves {method} {path}; this listener's routes are in GET /openapi.json"),
        Vec::new(),
    );
    unread(resp, &headers)
}

/// `resp` to a request whose body (if any) was not read: the connection
/// ends after it, and says so.
fn unread(mut resp: Response, headers: &axum::http::HeaderMap) -> Response {
    if crate::listener::closing::has_body(headers) {
        crate::listener::closing::close(&mut resp);
    }
    resp
}

/// A route asked with a method it does not serve: a 405 problem (the
/// router adds the `Allow` header naming those it does).
async fn no_method(method: axum::http::Method, headers: axum::http::HeaderMap) -> Response {
    let resp = crate::domain::problem::problem(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        format!("this route does not serve {method}; the Allow header names what it does"),
        Vec::new(),
    );
    unread(resp, &headers)
}

/// `text` (a rendered document) with each header parameter named `from`
/// (any case) named `to`.
pub(crate) fn renamed(text: &str, headers: &[(&str, &str)]) -> String {
    let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_owned();
    };
    let params = doc
        .get_mut("paths")
        .and_then(|p| p.as_object_mut())
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
        .filter_map(|op| op.get_mut("parameters").and_then(|p| p.as_array_mut()))
        .flat_map(|p| p.iter_mut());
    for param in params {
        if param["in"] != "header" {
            continue;
        }
        let Some(name) = param["name"].as_str() else {
            continue;
        };
        if let Some((_, to)) = headers
            .iter()
            .find(|(from, _)| from.eq_ignore_ascii_case(name))
        {
            param["name"] = serde_json::Value::from(*to);
        }
    }
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| text.to_owned());
    out.push('\n');
    out
}

/// The document of `routes` (as [`finish`] serves it).
pub(crate) fn of<S>(routes: OpenApiRouter<S>, listener: Listener) -> String
where
    S: Clone + Send + Sync + 'static,
{
    let mut api = routes.routes(routes!(document)).into_openapi();
    describe(&mut api, listener);
    render(&api)
}

/// Title, version, description and the security scheme.
fn describe(api: &mut OpenApi, listener: Listener) {
    let (title, about, scheme, what) = match listener {
        Listener::Intake => (
            "dripfeed-relay intake",
            "The intake listener (`listen`, 127.0.0.1:8080 by default): senders post \
             webhooks and look them up. With [[tenants]] every request but /healthz and \
             /openapi.json needs `Authorization: Bearer API_KEY`; an open relay (loopback \
             only) needs none. Every refusal is an RFC 9457 problem.",
            "tenant_key",
            "A tenant's API key (its SHA-256 is in [[tenants.keys]]).",
        ),
        Listener::Admin => (
            "dripfeed-relay admin",
            "The admin listener (`admin_listen`, 127.0.0.1:8090 by default): probes, \
             metrics and the admin API. /healthz, /readyz, /metrics and /openapi.json need \
             no token; the rest need `Authorization: Bearer ADMIN_TOKEN` when \
             admin_token_sha256 is set. Every refusal is an RFC 9457 problem.",
            "admin_token",
            "The admin token (its SHA-256 is admin_token_sha256).",
        ),
    };
    api.info.title = title.to_owned();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    api.info.description = Some(about.to_owned());
    api.info.license = None;
    api.info.contact = None;
    let bearer = HttpBuilder::new()
        .scheme(HttpAuthScheme::Bearer)
        .description(Some(what))
        .build();
    api.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(scheme, SecurityScheme::Http(bearer));
}

/// The document as pretty JSON, ending in a newline.
fn render(api: &OpenApi) -> String {
    let mut text = serde_json::to_value(api)
        .map(|mut doc| {
            link_names(&mut doc);
            needs_secret(&mut doc);
            doc
        })
        .and_then(|doc| serde_json::to_string_pretty(&doc))
        .unwrap_or_else(|e| {
            // Serializing a document of strings and maps does not fail.
            format!("{{\"error\":\"{e}\"}}")
        });
    text.push('\n');
    text
}

/// utoipa 5 writes a Link Object's fields in snake case (`operation_id`);
/// OpenAPI names them `operationId` and `requestBody`.
fn link_names(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    let responses = paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
        .filter_map(|op| op.get_mut("responses").and_then(|r| r.as_object_mut()))
        .flat_map(|r| r.values_mut());
    for response in responses {
        let Some(links) = response.get_mut("links").and_then(|l| l.as_object_mut()) else {
            continue;
        };
        for link in links.values_mut().filter_map(|l| l.as_object_mut()) {
            for (snake, camel) in [
                ("operation_id", "operationId"),
                ("request_body", "requestBody"),
            ] {
                if let Some(v) = link.remove(snake) {
                    link.insert(camel.to_owned(), v);
                }
            }
        }
    }
}

/// A `PUT`'s `previous_secret` (a string) needs `secret` (a string) beside
/// it: said in the schema as `if`/`then`, which utoipa does not write.
fn needs_secret(doc: &mut serde_json::Value) {
    let Some(put) = doc
        .pointer_mut("/components/schemas/DestinationPut")
        .and_then(|s| s.as_object_mut())
    else {
        return;
    };
    put.insert(
        "if".into(),
        serde_json::json!({
            "required": ["previous_secret"],
            "properties": {"previous_secret": {"type": "string"}}
        }),
    );
    put.insert(
        "then".into(),
        serde_json::json!({
            "required": ["secret"],
            "properties": {"secret": {"type": "string"}}
        }),
    );
}
