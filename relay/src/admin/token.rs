//! The admin token: `Authorization: Bearer ADMIN_TOKEN`, whose SHA-256 is
//! `admin_token_sha256`, compared in constant time, or the status page's
//! cookie holding it ([`super::page::session`]). Without a configured
//! digest every request passes (the admin listener is then on loopback).
//! A request that changes something from a browser on another origin
//! (`Origin` not the listener's) is refused (403) either way; without a
//! token, so is one naming the listener by a host name (DNS rebinding).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Admin;
use super::page::session;
use crate::auth::bearer::{Bearer, Unauthorized};
use crate::domain::problem::problem;

/// 403 for a request naming the listener by a host name where no admin
/// token is set.
pub(crate) fn not_local() -> Response {
    problem(
        StatusCode::FORBIDDEN,
        "not-local",
        "without an admin token the admin listener answers requests that name it by \
         address or as localhost only"
            .into(),
        Vec::new(),
    )
}

/// Lets the request through with the admin token; else 401.
pub(crate) async fn require(
    State(admin): State<Arc<Admin>>,
    request: Request,
    next: Next,
) -> Response {
    if !request.method().is_safe() && !session::same_origin(request.headers()) {
        return problem(
            StatusCode::FORBIDDEN,
            "cross-origin",
            "a change sent from another origin is refused".into(),
            Vec::new(),
        );
    }
    match authorized(&admin, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => *refused,
    }
}

/// Whether `headers` may use the guarded routes and the status page:
/// without an admin token, a request naming the listener by address or as
/// localhost; with one, the bearer token, or (without an `Authorization`
/// header) the page's session cookie. `Err`: the answer instead (403
/// `not-local`, 401).
pub(crate) fn authorized(admin: &Admin, headers: &HeaderMap) -> Result<(), Box<Response>> {
    let token = admin.token.get();
    let Some(token) = token.as_ref() else {
        return match session::local_host(headers) {
            true => Ok(()),
            false => Err(Box::new(not_local())),
        };
    };
    if !headers.contains_key(header::AUTHORIZATION) && admin.session.signed_in(headers, token) {
        return Ok(());
    }
    match Bearer::from_headers(headers) {
        Ok(key) if key.digest().same(token) => Ok(()),
        Ok(_) => Err(Box::new(Unauthorized::Unknown.admin_response())),
        Err(why) => Err(Box::new(why.admin_response())),
    }
}
