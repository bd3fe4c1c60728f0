//! Traces over OTLP (`otlp_endpoint`): one trace per webhook, with a span
//! for intake and one per delivery attempt.
//!
//! Intake continues a sender's W3C `traceparent` (or starts a trace, kept
//! at `otlp_sample_ratio`), and the webhook keeps its intake span's context
//! ([`TraceContext`], in the journal and in the fleet's queue), so every
//! attempt joins that trace, after a restart and on another relay too, and
//! the receiver gets a `traceparent` naming the attempt. Retries and
//! dead-lettering are events on the attempt that led to them.
//!
//! **Why the `opentelemetry` API and not `tracing` spans.** An attempt's
//! parent is a context read back from a record (a remote parent), not the
//! span in which the code runs, and the drain polls many deliveries in one
//! task; spans made with the SDK's tracer from that context say exactly
//! that. The relay's log lines stay on `tracing`. Without an endpoint no
//! provider exists and intake does one `Option` check.

mod export;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, Response};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span};

pub(crate) use crate::domain::trace_context::TraceContext;
pub(crate) use export::start;

use crate::config::Settings;

/// The relay's tracer, and the queue its spans wait in for export.
pub(crate) struct Traces {
    tracer: SdkTracer,
    provider: SdkTracerProvider,
    exporter: export::Handle,
}

/// An intake span, ended with the answer.
pub(crate) struct IntakeSpan {
    span: Span,
    context: TraceContext,
}

/// A delivery attempt's span; one dropped before [`end`](Self::end) (the
/// attempt timed out or was cancelled) ends as an error.
pub(crate) struct AttemptSpan {
    span: Option<Span>,
    context: TraceContext,
}

impl Drop for AttemptSpan {
    fn drop(&mut self) {
        if let Some(mut span) = self.span.take() {
            span.set_attribute(KeyValue::new("error.type", "timeout"));
            span.set_status(Status::error("the attempt ended without an answer"));
            span.end();
        }
    }
}

/// The parent named by `context`, as a remote span.
fn remote(context: &TraceContext) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_bytes(context.trace_id),
        SpanId::from_bytes(context.span_id),
        TraceFlags::new(context.flags),
        true,
        TraceState::default(),
    ))
}

/// The context a span gives its children.
fn context_of(span: &Span) -> TraceContext {
    let c = span.span_context();
    TraceContext {
        trace_id: c.trace_id().to_bytes(),
        span_id: c.span_id().to_bytes(),
        flags: c.trace_flags().to_u8(),
    }
}

impl Traces {
    /// The span of one `POST /v1/webhooks/deliver`, continuing the
    /// request's `traceparent` if it has a readable one.
    pub(crate) fn intake(&self, headers: &HeaderMap) -> IntakeSpan {
        let parent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(TraceContext::parse)
            .map_or_else(Context::new, |c| remote(&c));
        let span = self
            .tracer
            .span_builder("webhook intake")
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", "POST"),
                KeyValue::new("url.path", "/v1/webhooks/deliver"),
            ])
            .start_with_context(&self.tracer, &parent);
        let context = context_of(&span);
        IntakeSpan { span, context }
    }

    /// The span of attempt `number` to `destination`, in the webhook's
    /// trace (`parent`, its intake span), or in a trace of its own for a
    /// webhook taken without one.
    pub(crate) fn attempt(
        &self,
        parent: Option<&TraceContext>,
        destination: &str,
        number: u32,
        id: u64,
    ) -> AttemptSpan {
        let parent = parent.map_or_else(Context::new, remote);
        let span = self
            .tracer
            .span_builder("webhook delivery")
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("http.request.method", "POST"),
                KeyValue::new("dripfeed.destination", destination.to_owned()),
                KeyValue::new("dripfeed.attempt", i64::from(number)),
                KeyValue::new("dripfeed.webhook.id", id.to_string()),
            ])
            .start_with_context(&self.tracer, &parent);
        let context = context_of(&span);
        AttemptSpan {
            span: Some(span),
            context,
        }
    }

    /// Exports what waits, within `limit` (at shutdown).
    pub(crate) async fn flush(&self, limit: Duration) {
        self.exporter.flush(limit).await;
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

impl IntakeSpan {
    /// What the webhook keeps: its attempts' parent.
    pub(crate) fn context(&self) -> TraceContext {
        self.context
    }

    /// Names the webhook the 202 names.
    pub(crate) fn taken(&mut self, id: u64) {
        self.span
            .set_attribute(KeyValue::new("dripfeed.webhook.id", id.to_string()));
    }

    /// Ends the span with the answer's status.
    pub(crate) fn end<B>(mut self, answer: &Response<B>) {
        let status = answer.status().as_u16();
        self.span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if status >= 500 {
            self.span.set_status(Status::error(status.to_string()));
        }
        self.span.end();
    }
}

/// How an attempt ended, for its span.
pub(crate) enum Ended {
    /// The receiver answered 2xx.
    Delivered,
    /// Another attempt follows (after the receiver's `Retry-After`, if it
    /// gave one).
    Retry(Option<Duration>),
    /// The webhook goes to the dead letters.
    DeadLettered,
}

impl AttemptSpan {
    /// The receiver's `traceparent`: this attempt, in the webhook's trace.
    pub(crate) fn header(&self) -> Option<HeaderValue> {
        HeaderValue::try_from(self.context.header()).ok()
    }

    /// Ends the span: the receiver's status (0: no answer), the error
    /// (`kind: message`) if the attempt failed, and what follows.
    pub(crate) fn end(mut self, status: u16, error: Option<&str>, then: Ended) {
        let Some(mut span) = self.span.take() else {
            return;
        };
        if status != 0 {
            span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        if let Some(error) = error {
            let kind = error.split(':').next().unwrap_or(error).to_owned();
            span.set_attribute(KeyValue::new("error.type", kind));
            span.set_status(Status::error(error.to_owned()));
        }
        match then {
            Ended::Delivered => {}
            Ended::Retry(after) => {
                let mut attributes = Vec::new();
                if let Some(after) = after {
                    let ms = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
                    attributes.push(KeyValue::new("dripfeed.retry_after_ms", ms));
                }
                span.add_event("retry scheduled", attributes);
            }
            Ended::DeadLettered => span.add_event("dead-lettered", Vec::new()),
        }
        span.end();
    }
}

/// Whether traces are to be exported: an endpoint configured, or named by
/// the standard OTLP variables.
pub(crate) fn wanted(s: &Settings) -> bool {
    s.otlp_endpoint.is_some()
        || export::ENDPOINT_VARIABLES
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

/// The tracer, shared by intake and the deliveries.
pub(crate) type Shared = Option<Arc<Traces>>;
