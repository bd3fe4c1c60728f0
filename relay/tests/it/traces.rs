//! Traces through the binary: a loopback OTLP collector reads what the
//! relay exports (protobuf over HTTP), and a receiver records the
//! `traceparent` each delivery carries. A sender's trace is continued: one
//! intake span, one span per attempt (a retry as an event), the receiver
//! told each attempt's span; and the trace outlives a SIGKILL, the
//! webhook's context kept in the journal, and another relay of a fleet
//! delivers in the same trace (the context kept in the shared queue).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

use crate::harness::{Relay, TempDir, argv, eventually};
use crate::receivers::{self, Hit, Log};

/// A span as the collector got it.
#[derive(Clone, Debug)]
struct Got {
    path: String,
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    attributes: Vec<(String, String)>,
    events: Vec<String>,
}

impl Got {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A collector on a free loopback port: every span of every export.
async fn collector() -> (std::net::SocketAddr, Arc<Mutex<Vec<Got>>>) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let kept = spans.clone();
    let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
        let kept = kept.clone();
        async move {
            let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                return StatusCode::BAD_REQUEST.into_response();
            };
            let mut kept = kept.lock().unwrap();
            for rs in export.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                    .map(|v| format!("{v:?}"))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        let attributes = s
                            .attributes
                            .iter()
                            .map(|kv| {
                                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                                    Some(Value::StringValue(s)) => s.clone(),
                                    Some(Value::IntValue(i)) => i.to_string(),
                                    other => format!("{other:?}"),
                                };
                                (kv.key.clone(), v)
                            })
                            .collect();
                        kept.push(Got {
                            path: uri.path().to_owned(),
                            service: service.clone(),
                            name: s.name.clone(),
                            trace_id: hex(&s.trace_id),
                            span_id: hex(&s.span_id),
                            parent: hex(&s.parent_span_id),
                            attributes,
                            events: s.events.iter().map(|e| e.name.clone()).collect(),
                        });
                    }
                }
            }
            ([("content-type", "application/x-protobuf")], Bytes::new()).into_response()
        }
    });
    (receivers::serve(app).await, spans)
}

/// The `traceparent` a delivery carried, split: (trace id, span id).
fn parent_of(hit: &Hit) -> (String, String) {
    let v = hit.headers["traceparent"].to_str().unwrap();
    let parts: Vec<&str> = v.split('-').collect();
    assert_eq!(parts.len(), 4, "{v}");
    assert_eq!(parts[0], "00");
    (parts[1].to_owned(), parts[2].to_owned())
}

const SENDER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SENDER_SPAN: &str = "b7ad6b7169203331";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_one_trace_from_the_sender_to_the_receiver() {
    let (otlp, spans) = collector().await;
    // The receiver answers each webhook's first try 503, then 204.
    let log = Arc::new(Log::default());
    let receiver = receivers::recording(
        log.clone(),
        Duration::ZERO,
        Arc::new(|_: &Hit, tries| match tries {
            1 => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            _ => StatusCode::NO_CONTENT.into_response(),
        }),
    )
    .await;
    let dir = TempDir::new("traces");
    let relay = Relay::start(&format!(
        "--downstream http://{receiver}/hooks --otlp-endpoint http://{otlp}/v1/traces \
         --retry-min 50ms --retry-max 200ms --no-journal --dead-letter-file {}",
        dir.arg("dead-letter.jsonl")
    ))
    .await;
    let traceparent = format!("00-{SENDER_TRACE}-{SENDER_SPAN}-01");
    let (status, answer) = relay
        .post(&[("traceparent", traceparent.as_str())], "{\"a\":1}")
        .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().unwrap().to_owned();
    // And one that starts its own trace.
    let (status, second) = relay.post(&[], "{\"b\":2}").await;
    assert_eq!(status, 202);
    let second = second["id"].as_str().unwrap().to_owned();
    assert!(log.until(Duration::from_secs(20), |h| h.len() >= 4).await);
    let wanted = |s: &[Got]| {
        let count = |name: &str| s.iter().filter(|g| g.name == name).count();
        count("webhook delivery") >= 4 && count("webhook intake") >= 2
    };
    assert!(
        eventually(Duration::from_secs(20), || async {
            wanted(&spans.lock().unwrap())
        })
        .await,
        "exported: {:#?}",
        spans.lock().unwrap()
    );
    let spans = spans.lock().unwrap().clone();
    assert!(spans.iter().all(|s| s.path == "/v1/traces"));
    assert!(
        spans.iter().all(|s| s.service.contains("dripfeed-relay")),
        "service.name: {:?}",
        spans[0].service
    );

    // The sender's trace: its intake span is a child of the sender's span.
    let intake = spans
        .iter()
        .find(|s| s.name == "webhook intake" && s.trace_id == SENDER_TRACE)
        .expect("the intake span, in the sender's trace");
    assert_eq!(intake.parent, SENDER_SPAN);
    assert_eq!(intake.attribute("http.response.status_code"), Some("202"));
    assert_eq!(intake.attribute("dripfeed.webhook.id"), Some(id.as_str()));
    // Two attempts, children of the intake span; the first one's retry is
    // an event; each told the receiver its own span.
    let mut attempts: Vec<&Got> = spans
        .iter()
        .filter(|s| s.name == "webhook delivery" && s.trace_id == SENDER_TRACE)
        .collect();
    attempts.sort_by_key(|s| s.attribute("dripfeed.attempt").map(str::to_owned));
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    for (n, (attempt, status)) in attempts.iter().zip(["503", "204"]).enumerate() {
        assert_eq!(attempt.parent, intake.span_id);
        assert_eq!(
            attempt.attribute("dripfeed.attempt"),
            Some((n + 1).to_string().as_str())
        );
        assert_eq!(attempt.attribute("dripfeed.destination"), Some("default"));
        assert_eq!(attempt.attribute("http.response.status_code"), Some(status));
    }
    assert_eq!(attempts[0].events, ["retry scheduled"]);
    assert_eq!(attempts[0].attribute("error.type"), Some("status"));
    assert!(attempts[1].events.is_empty());
    let hits = log.hits();
    let told: Vec<(String, String)> = hits.iter().filter(|h| h.key == id).map(parent_of).collect();
    assert_eq!(told.len(), 2);
    for (trace, span) in &told {
        assert_eq!(trace, SENDER_TRACE);
        assert!(attempts.iter().any(|a| &a.span_id == span), "{span}");
    }

    // A webhook sent without a traceparent starts a trace of its own,
    // which its deliveries carry.
    let own = spans
        .iter()
        .find(|s| s.name == "webhook intake" && s.attribute("dripfeed.webhook.id") == Some(&second))
        .expect("the second webhook's intake span");
    assert_ne!(own.trace_id, SENDER_TRACE);
    assert_eq!(own.parent, "", "a root span");
    let (trace, _) = parent_of(hits.iter().find(|h| h.key == second).unwrap());
    assert_eq!(trace, own.trace_id);
    let m = relay.metrics().await;
    assert_eq!(m.get("dripfeed_relay_trace_spans_dropped_total", &[]), 0.0);
}

/// A receiver answering 503 until `up` is set, then 204.
async fn down_until_up() -> (std::net::SocketAddr, Arc<Log>, Arc<AtomicBool>) {
    let up = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Log::default());
    let answer_up = up.clone();
    let receiver = receivers::recording(
        log.clone(),
        Duration::ZERO,
        Arc::new(move |_: &Hit, _| match answer_up.load(Ordering::SeqCst) {
            true => StatusCode::NO_CONTENT.into_response(),
            false => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        }),
    )
    .await;
    (receiver, log, up)
}

/// Posts `body` to `first` in the sender's trace, lets its receiver
/// (answering 503, see [`down_until_up`]) see the first attempt, SIGKILLs
/// `first`, brings the receiver up and starts `second` with `start`: every
/// attempt (before and after) carries the sender's trace, and the
/// delivery that succeeded is exported in it. Returns the second relay.
async fn killed_then_delivered_in_the_trace<F, Fut>(
    mut first: Relay,
    start: F,
    (log, up): (&Log, &AtomicBool),
    spans: &Mutex<Vec<Got>>,
    body: &str,
) -> Relay
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Relay>,
{
    let traceparent = format!("00-{SENDER_TRACE}-{SENDER_SPAN}-01");
    let (status, answer) = first
        .post(
            &[
                ("traceparent", traceparent.as_str()),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().unwrap().to_owned();
    assert!(log.until(Duration::from_secs(20), |h| !h.is_empty()).await);
    first.kill().await; // SIGKILL: the webhook waits for a retry
    up.store(true, Ordering::SeqCst);
    let second = start().await;
    let delivered = |h: &[Hit]| h.iter().filter(|h| h.key == id).count() >= 2;
    assert!(log.until(Duration::from_secs(30), delivered).await);
    for hit in log.hits().iter().filter(|h| h.key == id) {
        assert_eq!(
            parent_of(hit).0,
            SENDER_TRACE,
            "every attempt, before and after"
        );
    }
    let exported = |s: &[Got]| {
        s.iter().any(|g| {
            g.name == "webhook delivery"
                && g.trace_id == SENDER_TRACE
                && g.attribute("http.response.status_code") == Some("204")
        })
    };
    assert!(
        eventually(Duration::from_secs(20), || async {
            exported(&spans.lock().unwrap())
        })
        .await,
        "exported: {:#?}",
        spans.lock().unwrap()
    );
    second
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_outlives_a_crash_and_the_standard_variable_names_the_collector() {
    let (otlp, spans) = collector().await;
    let (receiver, log, up) = down_until_up().await;
    let dir = TempDir::new("traces-crash");
    let args = argv(&format!(
        "--downstream http://{receiver}/hooks --data-dir {} --retry-min 1s --retry-max 2s",
        dir.arg("data")
    ));
    let base = format!("http://{otlp}");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", base.as_str())];
    let first = Relay::start_with(&args, &env).await;
    let again = || Relay::start_with(&args, &env);
    let second =
        killed_then_delivered_in_the_trace(first, again, (&log, &up), &spans, "{\"c\":3}").await;
    assert!(spans.lock().unwrap().iter().all(|s| s.path == "/v1/traces"));
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_relay_of_the_fleet_delivers_in_the_same_trace() {
    if !crate::support_redis::available("another_relay_of_the_fleet_delivers_in_the_same_trace") {
        return;
    }
    let redis = crate::support_redis::RedisServer::start();
    let (otlp, spans) = collector().await;
    let (receiver, log, up) = down_until_up().await;
    let dir = TempDir::new("traces-fleet");
    let node = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --destination billing=http://{receiver}/hooks \
             --otlp-endpoint http://{otlp}/v1/traces --retry-min 1s --retry-max 2s \
             --deliver-timeout 2s --data-dir {}",
            redis.url(),
            dir.arg(name),
        ))
    };
    // Relay a tries once (503) and dies; its retry waits in Redis for b.
    let a = Relay::start_with(&node("a"), &[]).await;
    let b_args = node("b");
    let b = || Relay::start_with(&b_args, &[]);
    let b = killed_then_delivered_in_the_trace(a, b, (&log, &up), &spans, "{\"d\":4}").await;
    drop(b);
}
