//! The dashboard (`dashboards/dripfeed-relay.json`) and the alert rules
//! (`dashboards/alerts.yml`) query only series the relay exports: a relay
//! of each engine takes a little traffic (accepted, refused, retried,
//! dead-lettered) and every metric name a panel or a rule names is on its
//! `/metrics` page, but for those of the other engine. The series added
//! for them count what they say: intake answers by status and reason,
//! readiness, a destination's configured rate and AIMD bounds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::contract::{Bench, Engine};
use crate::harness::{Metrics, eventually};
use crate::receivers::{self, Log};

const DASHBOARD: &str = include_str!("../../../dashboards/dripfeed-relay.json");
const ALERTS: &str = include_str!("../../../dashboards/alerts.yml");

/// Every metric name in `text`: words starting `leaky_bucket_` or
/// `dripfeed_` (a histogram's `_bucket` series as named).
fn names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("leaky_bucket_") || w.starts_with("dripfeed_"))
        .map(str::to_owned)
        .collect()
}

/// Whether the page has a series called `name`.
fn on_page(page: &str, name: &str) -> bool {
    page.lines().any(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(['{', ' ']))
    })
}

async fn watched(engine: Engine, missing_here: &[&str]) {
    // Every webhook fails once (a retry, an error of kind status); one
    // whose body says "doomed" always fails (a dead letter).
    let log = Arc::new(Log::default());
    let rx = receivers::recording(
        log.clone(),
        Duration::ZERO,
        Arc::new(|hit, tries| {
            let fail = tries == 1 || hit.body.starts_with(b"{\"doomed\"");
            match fail {
                true => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                false => StatusCode::NO_CONTENT.into_response(),
            }
        }),
    )
    .await;
    let adaptive = match engine {
        Engine::Local => "--adaptive --floor 5 --ceiling 300",
        Engine::Fleet => "",
    };
    let bench = Bench::start(
        engine,
        "watch",
        &format!(
            "--destination a=http://{rx}/a --destination b=http://{rx}/b \
             --retries 1 --retry-min 50ms --retry-max 100ms {adaptive}"
        ),
    )
    .await;
    let relay = &bench.relay;
    let client = crate::harness::http();
    let post = |destination: Option<&str>, key: &str| {
        let body = match key {
            "doomed" => "{\"doomed\":true}",
            _ => "{}",
        };
        let mut req = client
            .post(relay.url("/v1/webhooks/deliver"))
            .header("idempotency-key", key)
            .body(body);
        if let Some(d) = destination {
            req = req.header("x-destination", d);
        }
        async move { req.send().await.map_or(0, |r| r.status().as_u16()) }
    };
    for n in 0..5 {
        assert_eq!(post(Some("a"), &format!("k{n}")).await, 202);
    }
    assert_eq!(post(Some("a"), "k0").await, 202, "a duplicate");
    assert_eq!(post(Some("b"), "doomed").await, 202);
    assert_eq!(post(None, "k9").await, 422, "no destination, two possible");
    assert_eq!(post(Some("nowhere"), "k8").await, 404);
    let done = eventually(Duration::from_secs(30), || async {
        let m = relay.metrics().await;
        let delivered = m
            .find(
                "leaky_bucket_jobs_total",
                &[("destination", "a"), ("outcome", "delivered")],
            )
            .unwrap_or(0.0);
        let dead = m
            .find(
                "leaky_bucket_jobs_total",
                &[("destination", "b"), ("outcome", "dead_lettered")],
            )
            .unwrap_or(0.0);
        delivered >= 5.0 && dead >= 1.0
    })
    .await;
    assert!(done, "{}", relay.metrics_page().await);
    let page = relay.metrics_page().await;

    let mut wanted = names(DASHBOARD);
    wanted.extend(names(ALERTS));
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| !on_page(&page, n) && !missing_here.contains(&n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{engine:?}: the dashboard or the rules query {missing:?}, not on the page:\n{page}"
    );
    // Those said to be missing are: the list stays true.
    for name in missing_here {
        assert!(!on_page(&page, name), "{engine:?} exports {name} now");
    }

    let m = Metrics::parse(&page);
    let answers = |status: &str, reason: &str| {
        m.get(
            "dripfeed_relay_intake_answers_total",
            &[("status", status), ("reason", reason)],
        )
    };
    assert_eq!(answers("202", "queued"), 6.0, "{page}");
    assert_eq!(answers("202", "duplicate"), 1.0);
    assert_eq!(answers("422", "missing-destination"), 1.0);
    assert_eq!(answers("404", "unknown-destination"), 1.0);
    assert_eq!(m.get("dripfeed_relay_ready", &[]), 1.0);
    assert_eq!(m.get("dripfeed_relay_down", &[("part", "journal")]), 0.0);
    let rate = |bound| {
        m.find(
            "dripfeed_relay_destination_rate",
            &[("destination", "a"), ("bound", bound)],
        )
    };
    assert_eq!(rate("configured"), Some(200.0));
    match engine {
        Engine::Local => assert_eq!((rate("floor"), rate("ceiling")), (Some(5.0), Some(300.0))),
        Engine::Fleet => assert_eq!((rate("floor"), rate("ceiling")), (None, None)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_rules_query_what_a_local_relay_exports() {
    watched(
        Engine::Local,
        &[
            "dripfeed_relay_fleet_queue_depth",
            "dripfeed_relay_fleet_queue_capacity",
            "dripfeed_redis_round_trips_total",
            "leaky_bucket_global_errors_total",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_rules_query_what_a_fleet_relay_exports() {
    // The fleet keeps retries and dead letters in Redis (its depth counts
    // waiting retries); its breaker is the fleet's, shown by each relay.
    watched(
        Engine::Fleet,
        &[
            "dripfeed_relay_dead_letter_lines",
            "leaky_bucket_retry_wait",
        ],
    )
    .await;
}
