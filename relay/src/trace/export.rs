//! The spans' way out: a bounded queue (a span that finds it full is
//! dropped and counted, never waited for) drained by one task that posts
//! batches over OTLP/HTTP (protobuf) with the relay's own TLS settings.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, RetryPolicy, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    Sampler, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use tokio::sync::{mpsc, oneshot};

use super::Traces;
use crate::config::Settings;
use crate::telemetry::{TRACE_EXPORTS, TRACE_SPANS_DROPPED};

/// The variables the OTLP specification names for the traces' endpoint.
pub(super) const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Spans in one export at most.
const BATCH: usize = 512;
/// How long a span waits for others to share its export at most.
const LINGER: Duration = Duration::from_millis(500);
/// An export's time limit, the answer's body included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a collector that keeps refusing is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// What the export task is sent.
enum Message {
    /// A finished span.
    Span(Box<SpanData>),
    /// Export everything sent before, then answer.
    Flush(oneshot::Sender<()>),
}

/// The queue's sending end, given to the tracer provider.
#[derive(Debug, Clone)]
pub(super) struct Handle {
    queue: mpsc::Sender<Message>,
}

impl Handle {
    /// Exports what was queued before, within `limit`.
    pub(super) async fn flush(&self, limit: Duration) {
        let (done, wait) = oneshot::channel();
        let _ = tokio::time::timeout(limit, async {
            if self.queue.send(Message::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        })
        .await;
    }
}

impl SpanProcessor for Handle {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queue.try_send(Message::Span(Box::new(span))).is_err() {
            metrics::counter!(TRACE_SPANS_DROPPED).increment(1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// Puts a message where it goes: a span in the batch, a flush's answer
/// with those to give once the batch is out.
fn sort(message: Message, batch: &mut Vec<SpanData>, flushed: &mut Vec<oneshot::Sender<()>>) {
    match message {
        Message::Span(span) => batch.push(*span),
        Message::Flush(done) => flushed.push(done),
    }
}

/// Posts batches from `queue` with `exporter` until every sender is gone.
async fn export(mut queue: mpsc::Receiver<Message>, exporter: opentelemetry_otlp::SpanExporter) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut flushed = Vec::new();
    // Failures since the last line about them, and when that was.
    let (mut failed, mut warned) = (0u64, None::<tokio::time::Instant>);
    while let Some(first) = queue.recv().await {
        sort(first, &mut batch, &mut flushed);
        let until = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH && flushed.is_empty() {
            match tokio::time::timeout_at(until, queue.recv()).await {
                Ok(Some(m)) => sort(m, &mut batch, &mut flushed),
                Ok(None) | Err(_) => break,
            }
        }
        // A flush exports what is queued now, all of it.
        while !flushed.is_empty()
            && let Ok(m) = queue.try_recv()
        {
            sort(m, &mut batch, &mut flushed);
        }
        while !batch.is_empty() {
            let now: Vec<SpanData> = batch.drain(..batch.len().min(BATCH)).collect();
            let n = now.len() as u64;
            let result = match exporter.export(now).await {
                Ok(()) => "ok",
                Err(e) => {
                    failed += n;
                    let due = warned.is_none_or(|at| at.elapsed() >= WARN_EVERY);
                    if due {
                        tracing::warn!(error = %e, spans = failed, "traces could not be exported (not sent again)");
                        (failed, warned) = (0, Some(tokio::time::Instant::now()));
                    }
                    "failed"
                }
            };
            metrics::counter!(TRACE_EXPORTS, "result" => result).increment(n);
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

/// The OTLP client: hyper over rustls, trusting the system's roots and
/// `ca_file`'s as deliveries do (but connecting anywhere: a collector on a
/// private address is where collectors are).
#[derive(Debug, Clone)]
struct Otlp {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

#[async_trait::async_trait]
impl HttpClient for Otlp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let exchange = async {
            let answer = self.client.request(request.map(Full::new)).await?;
            let (parts, body) = answer.into_parts();
            let body = Limited::new(body, 1 << 20).collect().await?.to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        tokio::time::timeout(EXPORT_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("no answer within {EXPORT_TIMEOUT:?}"))?
    }
}

/// The tracer of the settings `s`, or `None` when no endpoint is
/// configured (nor named by the OTLP variables); an endpoint the exporter
/// refuses is an error.
pub(crate) fn start(s: &Settings) -> Result<Option<Traces>, String> {
    if !super::wanted(s) {
        return Ok(None);
    }
    let tls = crate::tls::client::config(s.ca_file.as_deref())?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let connector = HttpsConnector::from((http, std::sync::Arc::new(tls)));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(Otlp { client })
        .with_timeout(EXPORT_TIMEOUT)
        // Its retries sleep on the thread (no runtime of its own): a
        // batch the collector refuses is counted and dropped instead.
        .with_retry_policy(RetryPolicy::disabled());
    if let Some(url) = &s.otlp_endpoint {
        builder = builder.with_endpoint(url.as_str());
    }
    let mut exporter = builder
        .build()
        .map_err(|e| format!("otlp_endpoint: the trace exporter: {e}"))?;
    let resource = Resource::builder()
        .with_service_name("dripfeed-relay")
        .build();
    // The exporter runs outside the provider: it is told the resource here.
    exporter.set_resource(&resource);
    metrics::counter!(TRACE_SPANS_DROPPED).increment(0);
    for result in ["ok", "failed"] {
        metrics::counter!(TRACE_EXPORTS, "result" => result).increment(0);
    }
    let (queue, waiting) = mpsc::channel(s.otlp_queue);
    tokio::spawn(export(waiting, exporter));
    let handle = Handle { queue };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(handle.clone())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            s.otlp_sample_ratio,
        ))))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("dripfeed-relay");
    Ok(Some(Traces {
        tracer,
        provider,
        exporter: handle,
    }))
}
