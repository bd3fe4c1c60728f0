//! The admin token: `Authorization: Bearer ADMIN_TOKEN`, whose SHA-256 is
//! `admin_token_sha256`, compared in constant time, or the status page's
//! cookie holding it ([`super::page::session`]). Without a configured
//! digest every request passes (the admin listener is then on loopback).
//! A request that changes something from a browser on another origin
//! (`Origin` not the listener's) is refused (403) either way.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Admin;
use super::page::session;
use crate::auth::bearer::{Bearer, Unauthorized};
use crate::domain::problem::problem;

/// Lets the request through with the admin token; else 401.
pub async fn require(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    if !request.method().is_safe() && !session::same_origin(request.headers()) {
        return problem(
            StatusCode::FORBIDDEN,
            "cross-origin",
            "a change sent from another origin is refused".into(),
            Vec::new(),
        );
    }
    let token = admin.token.get();
    let Some(token) = token.as_ref() else {
        return next.run(request).await;
    };
    let headers = request.headers();
    if !headers.contains_key(header::AUTHORIZATION) && session::signed_in(headers, token) {
        return next.run(request).await;
    }
    match Bearer::from_headers(headers) {
        Ok(key) if key.digest().same(token) => next.run(request).await,
        Ok(_) => Unauthorized::Unknown.response(),
        Err(why) => why.response(),
    }
}
