//! What a listener serves: its router, and optionally one route answered
//! before the router is asked.
//!
//! The intake's `POST /v1/webhooks/deliver` is called once for every
//! webhook; going through axum's router (its path match, the boxed and
//! cloned route services, the layers' extensions) cost about a tenth of a
//! webhook's instructions (callgrind). A [`Direct`] route calls its handler
//! straight away, with the same request (the listener's extensions in it)
//! and the same answer; every other request, including that path with
//! another method, goes to the router as before.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use tower::ServiceExt;

/// An answer on its way.
pub(crate) type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// A route answered without the router.
#[derive(Clone)]
pub(crate) struct Direct {
    /// Its method.
    pub method: Method,
    /// Its path, matched exactly (a query string may follow).
    pub path: &'static str,
    /// Its handler.
    pub handle: Arc<dyn Fn(Request) -> Answer + Send + Sync>,
}

/// What a listener serves.
#[derive(Clone)]
pub(crate) struct App {
    router: Router,
    direct: Option<Direct>,
}

impl From<Router> for App {
    fn from(router: Router) -> App {
        App {
            router,
            direct: None,
        }
    }
}

impl App {
    /// `router`, with `direct` answered before it.
    pub(crate) fn with_direct(router: Router, direct: Direct) -> App {
        App {
            router,
            direct: Some(direct),
        }
    }

    /// Answers `req`: a head over 64 KiB with 431 (the connection closed
    /// after), as every listener does; else its route.
    pub(crate) fn call(&self, req: Request) -> Answer {
        if req
            .extensions()
            .get::<super::framing::Framing>()
            .is_some_and(super::framing::Framing::too_long)
        {
            return Box::pin(async { Ok(too_long()) });
        }
        match &self.direct {
            Some(d) if req.method() == d.method && req.uri().path() == d.path => (d.handle)(req),
            _ => Box::pin(self.router.clone().oneshot(req)),
        }
    }
}

/// 431: a request head over 64 KiB; the connection is closed after.
fn too_long() -> Response {
    let mut resp = crate::domain::problem::problem(
        axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "head-too-large",
        "the request's head is over 64 KiB".to_owned(),
        Vec::new(),
    );
    super::closing::close(&mut resp);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::post;

    #[tokio::test]
    async fn the_direct_route_answers_its_method_and_path_and_the_router_the_rest() {
        let router = Router::new().route("/in", post(|| async { "router" }));
        let direct = Direct {
            method: Method::POST,
            path: "/in",
            handle: Arc::new(|_req| {
                Box::pin(async { Ok(Response::new(Body::from("direct"))) }) as Answer
            }),
        };
        let app = App::with_direct(router, direct);
        let text = |resp: Response| async move {
            let bytes = axum::body::to_bytes(resp.into_body(), 64).await.unwrap();
            String::from_utf8(bytes.to_vec()).unwrap()
        };
        let req = |method: &str, uri: &str| {
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap()
        };
        let resp = app.call(req("POST", "/in?x=1")).await.unwrap();
        assert_eq!(text(resp).await, "direct");
        // Another method, or another path, is the router's.
        let resp = app.call(req("GET", "/in")).await.unwrap();
        assert_eq!(resp.status(), 405);
        let resp = app.call(req("POST", "/in/")).await.unwrap();
        assert_eq!(resp.status(), 404);
        let plain = App::from(Router::new().route("/in", post(|| async { "router" })));
        let resp = plain.call(req("POST", "/in")).await.unwrap();
        assert_eq!(text(resp).await, "router");
    }
}
