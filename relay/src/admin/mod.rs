//! What the operator reads: `GET /metrics` (Prometheus text, passing
//! `promtool check metrics`) and the status line on stdout. For now
//! `/metrics` is served on the intake listener, as before; a separate
//! admin listener comes later.

pub mod status;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;

/// `GET /metrics`; `publish` sets the relay's own gauges first.
pub fn router(
    prometheus: PrometheusHandle,
    publish: impl Fn() + Clone + Send + Sync + 'static,
) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            publish();
            let page = prometheus.render();
            async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page).into_response() }
        }),
    )
}
