//! The status page at `GET /` on the admin listener: each destination's
//! queue against its bound, its rates, p99, breaker, counts and last
//! error, refreshed each second from `GET /v1/status` ([`view`]) and drawn
//! over the last minutes; a redrive button per destination calls `POST
//! /v1/dead-letters/redrive`. HTML, CSS and script are in the binary
//! (about 9 KB a page; no CDN, no build step).
//!
//! With an admin token configured, `GET /` shows a sign-in form until the
//! browser holds a session cookie ([`session`]); `POST /sign-in` checks
//! the token and sets it. Without a token the page is open where the
//! admin API is (loopback, unless `allow_unauthenticated`).

mod html;
pub(crate) mod session;
pub(crate) mod view;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Admin;
use crate::config::digest::KeyDigest;

/// An HTML answer, never cached (it holds live numbers).
fn html(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The page may not be framed by another site (clickjacking).
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// `GET /`: the page, or (with a token, not signed in) the sign-in form.
pub(crate) async fn index(
    State(admin): State<Arc<Admin>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Response {
    match super::token::authorized(&admin, &headers) {
        Ok(()) => {
            let find = view::find_in(raw.as_deref());
            let now = view::now(&admin, find.as_deref()).await;
            html(StatusCode::OK, html::status(&now, find.as_deref()))
        }
        Err(_) if admin.token.get().is_some() => html(StatusCode::OK, html::sign_in(false)),
        Err(refused) => *refused,
    }
}

/// `POST /sign-in` (a form with `token`): the cookie and back to the
/// page (303), or the form again (401); from another origin, 403.
pub(crate) async fn sign_in(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !session::same_origin(&headers) {
        return html(StatusCode::FORBIDDEN, html::sign_in(false));
    }
    if admin.token.get().is_none() && !session::local_host(&headers) {
        return super::token::not_local();
    }
    let given = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    let token = admin.token.get();
    let ok = match (token.as_ref(), &given) {
        (None, _) => true,
        (Some(want), Some(given)) => KeyDigest::of(given.as_bytes()).same(want),
        (Some(_), None) => false,
    };
    if !ok {
        return html(StatusCode::UNAUTHORIZED, html::sign_in(true));
    }
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Some(want) = token.as_ref()
        && let Some(cookie) = admin.session.set_cookie(want)
    {
        h.insert(header::SET_COOKIE, cookie);
    }
    resp
}
