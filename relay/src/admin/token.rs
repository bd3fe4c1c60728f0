//! The admin token: `Authorization: Bearer ADMIN_TOKEN`, whose SHA-256 is
//! `admin_token_sha256`, compared in constant time. Without a configured
//! digest every request passes (the admin listener is then on loopback).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::Admin;
use crate::auth::bearer::{Bearer, Unauthorized};

/// Lets the request through with the admin token; else 401.
pub async fn require(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    let token = admin.token.get();
    let Some(token) = token.as_ref() else {
        return next.run(request).await;
    };
    match Bearer::from_headers(request.headers()) {
        Ok(key) if key.digest().same(token) => next.run(request).await,
        Ok(_) => Unauthorized::Unknown.response(),
        Err(why) => why.response(),
    }
}
