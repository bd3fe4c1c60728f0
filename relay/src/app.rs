//! The relay itself: `POST /v1/webhooks/deliver` queues a webhook in a
//! dripfeed throttle whose drain POSTs it to the downstream; `GET /metrics`
//! and `GET /healthz`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use dripfeed::{
    Admitted, Attempt, Delivery, Downstream, Overflow, Reason, Rejected, Throttle, headers,
};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

use dripfeed::journal::{DecodeError, JobCodec, Journal};
use dripfeed::keyed::BucketStore;
use dripfeed::{Cause, PermitSource};

use crate::budget::{ByteBudget, Ticket};
use crate::dead_letter::FileSink;
use crate::idempotency::{Begin, Idempotency, body_hash};
use crate::latency::Latencies;

/// Bodies above this are refused with 413.
pub const MAX_BODY: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct RelayConfig {
    pub drain_rate: f64,
    pub latency_budget: Duration,
    pub overflow: Overflow,
    pub dead_letter_file: PathBuf,
    pub max_in_flight: usize,
    pub max_queue_bytes: u64,
    pub downstream: String,
    pub tenant_header: String,
    pub deliver_timeout: Duration,
    /// Let the drain rate follow the receiver (AIMD).
    pub adaptive: Option<dripfeed::rate::Aimd>,
    /// Each tenant's quota (burst, rate); without it tenants are not limited.
    pub tenant_quota: Option<dripfeed::keyed::Quota>,
    /// How a webhook the receiver answered 408, 429 or 5xx (or never
    /// answered) is tried again; without it, it is dead-lettered at once.
    pub retry: Option<dripfeed::RetryPolicy>,
    /// The journal's directory: a 202 is answered once the webhook is
    /// durable there, and a restart delivers what was unfinished. `None`:
    /// webhooks live in memory only.
    pub journal: Option<PathBuf>,
    /// Many receivers (`--destination`, `--destinations`): each its own
    /// leaky bucket, breaker and share of the in-flight budget.
    pub fanout: Option<crate::fanout::FanoutConfig>,
}

/// A queued webhook. Its ticket holds its bytes against the budget until
/// dropped; a webhook recovered from the journal has none (the journal's
/// own bound holds it).
pub struct Job {
    pub body: Bytes,
    pub content_type: Option<String>,
    pub tenant: Option<String>,
    pub received_unix_ms: u64,
    /// What its deliveries did, for its dead-letter line.
    pub trail: Trail,
    /// The destination it was sent to, when the relay fans out.
    pub destination: Option<Arc<str>>,
    _ticket: Option<Ticket>,
}

/// A webhook's attempts so far: its id (0 before the first), how many,
/// the receiver's last status (0: no answer), and the destination that
/// tried it (a webhook recovered from the journal learns it here).
#[derive(Default)]
pub struct Trail {
    pub id: AtomicU64,
    pub attempts: AtomicU32,
    pub last_status: AtomicU32,
    pub destination: std::sync::OnceLock<Arc<str>>,
}

impl Job {
    /// A webhook re-admitted from a dead-letter line (`--redrive`),
    /// holding its bytes against the budget like a new one.
    pub fn redriven(
        body: Bytes,
        content_type: Option<String>,
        tenant: Option<String>,
        received_unix_ms: u64,
        ticket: Ticket,
    ) -> Job {
        Job {
            body,
            content_type,
            tenant,
            received_unix_ms,
            trail: Trail::default(),
            destination: None,
            _ticket: Some(ticket),
        }
    }
}

/// The journal's encoding: the receive time, the content type and tenant
/// (length-prefixed, absent = `u32::MAX`), then the body.
impl JobCodec for Job {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.received_unix_ms.to_le_bytes());
        for field in [&self.content_type, &self.tenant] {
            match field {
                Some(s) => {
                    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
        out.extend_from_slice(&self.body);
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let short = || DecodeError::new("a webhook record cut short");
        let (ms, mut rest) = bytes.split_first_chunk::<8>().ok_or_else(short)?;
        let mut text = || -> Result<Option<String>, DecodeError> {
            let (len, after) = rest.split_first_chunk::<4>().ok_or_else(short)?;
            let len = u32::from_le_bytes(*len);
            if len == u32::MAX {
                rest = after;
                return Ok(None);
            }
            let (s, after) = after.split_at_checked(len as usize).ok_or_else(short)?;
            rest = after;
            String::from_utf8(s.to_vec())
                .map(Some)
                .map_err(|_| DecodeError::new("a header that is not UTF-8"))
        };
        let content_type = text()?;
        let tenant = text()?;
        Ok(Job {
            body: Bytes::copy_from_slice(rest),
            content_type,
            tenant,
            received_unix_ms: u64::from_le_bytes(*ms),
            trail: Trail::default(),
            destination: None,
            _ticket: None,
        })
    }
}

/// What the relay answered, by kind.
#[derive(Default)]
pub struct Answers {
    pub queued: AtomicU64,
    pub deferred: AtomicU64,
    pub full_503: AtomicU64,
    pub bytes_503: AtomicU64,
    pub closed_503: AtomicU64,
    pub quota_429: AtomicU64,
    pub store_503: AtomicU64,
    pub journal_503: AtomicU64,
    pub too_large_413: AtomicU64,
}

pub struct Relay {
    pub throttle: Throttle<Job>,
    pub budget: ByteBudget,
    pub sink: Arc<FileSink>,
    pub answers: Answers,
    /// Delivery latencies since the status line last read them.
    pub latencies: Arc<Latencies>,
    pub cfg: RelayConfig,
    /// Tenant quotas shared with other relays (`--postgres`, `--redis`);
    /// else in this relay's memory.
    pub tenants: Option<Arc<dyn BucketStore>>,
    /// Webhooks found unfinished in the journal at start.
    pub recovered: usize,
    /// Accepted `Idempotency-Key`s (beside the journal when there is one).
    pub idempotency: Idempotency,
    /// The destinations, when the relay fans out.
    pub fanout: Option<crate::fanout::Fanout>,
}

/// The settings the single throttle and every destination's throttle share:
/// rate, budget, overflow, timeout, dead letters, AIMD and retries, with
/// `max_in_flight` deliveries (the per-destination cap when fanning out).
/// Tenants are added by each caller (the destinations share one store);
/// fleet permits are for the single throttle only; the journal goes to
/// whichever runs.
fn template(
    cfg: &RelayConfig,
    sink: &Arc<FileSink>,
    max_in_flight: usize,
) -> dripfeed::ThrottleBuilder<Job> {
    let evicted_to = sink.clone();
    let mut b = Throttle::builder()
        .name("webhook_relay")
        .drain_rate(cfg.drain_rate)
        .latency_budget(cfg.latency_budget)
        .overflow(cfg.overflow)
        .max_in_flight(max_in_flight)
        .deliver_timeout(cfg.deliver_timeout + Duration::from_secs(1))
        .dead_letter(sink.clone())
        .on_evicted(move |job: Job| {
            if evicted_to.offer(job, "evicted").is_err() {
                eprintln!("dead-letter writer is gone: an evicted job was dropped");
            }
        });
    if let Some(aimd) = cfg.adaptive.clone() {
        b = b.adaptive(aimd);
    }
    if let Some(policy) = cfg.retry {
        b = b.retries(policy);
    }
    b
}

/// How long an `Idempotency-Key` is remembered, and how many at most.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(24 * 3600);
pub const IDEMPOTENCY_KEYS: usize = 1_000_000;

/// POSTs each job to the downstream URL, same body and content type;
/// signed (Standard Webhooks) when the destination has a secret.
pub struct HttpDownstream {
    pub client: reqwest::Client,
    pub url: String,
    pub latencies: Arc<Latencies>,
    /// The destination's signing key (the bytes of its `whsec_` secret).
    pub secret: Option<Arc<[u8]>>,
    /// The destination's name, when the relay fans out.
    pub name: Option<Arc<str>>,
}

#[async_trait::async_trait]
impl Downstream<Job> for HttpDownstream {
    async fn deliver(&self, job: &Job, attempt: Attempt) -> Delivery {
        if let Some(name) = &self.name {
            let _ = job.trail.destination.set(name.clone());
        }
        if self.url.is_empty() {
            // A destination recovered from the journal that the configuration
            // no longer names: its webhooks go to the dead-letter file.
            return Delivery::Failed;
        }
        let id = attempt.id().to_string();
        let mut req = self
            .client
            .post(&self.url)
            .header("idempotency-key", &id)
            .body(job.body.clone());
        if let Some(ct) = &job.content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        if let Some(key) = &self.secret {
            // Signed again on every attempt, with the time of the attempt.
            let ts = unix_ms() / 1000;
            req = req
                .header("webhook-id", &id)
                .header("webhook-timestamp", ts.to_string())
                .header(
                    "webhook-signature",
                    crate::fanout::sign(key, &id, ts, &job.body),
                );
        }
        let started = std::time::Instant::now();
        let answer = req.send().await;
        self.latencies.record(started.elapsed());
        let trail = &job.trail;
        trail.id.store(attempt.id(), Ordering::Relaxed);
        trail.attempts.store(attempt.number(), Ordering::Relaxed);
        let status = answer.as_ref().map_or(0, |r| r.status().as_u16());
        trail
            .last_status
            .store(u32::from(status), Ordering::Relaxed);
        match answer {
            Ok(resp) if resp.status().is_success() => Delivery::Done,
            Ok(resp) => match status {
                // The throttle caps a hint at the retry policy's longest backoff.
                408 | 429 | 500..=599 => Delivery::Retry {
                    after: retry_after(resp.headers()),
                },
                _ => Delivery::Failed, // other 4xx are final
            },
            Err(_) => Delivery::Retry { after: None },
        }
    }
}

/// A receiver's `Retry-After`: seconds, or an HTTP date (the wait until it).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    match v.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => {
            let at = httpdate::parse_http_date(v).ok()?;
            Some(
                at.duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO),
            )
        }
    }
}

impl Relay {
    /// Opens the dead-letter file and builds the throttle (install the
    /// metrics recorder before calling this).
    #[allow(dead_code)] // the example calls start_with; tests/relay.rs calls this
    pub async fn start(cfg: RelayConfig) -> std::io::Result<Arc<Relay>> {
        Self::start_with(cfg, None, None).await
    }

    /// [`start`](Self::start), with deliveries also taking permits from a
    /// limit shared by a fleet of relays (e.g. `RedisRate`).
    pub async fn start_with(
        cfg: RelayConfig,
        permits: Option<Arc<dyn PermitSource>>,
        tenants: Option<Arc<dyn BucketStore>>,
    ) -> std::io::Result<Arc<Relay>> {
        let sink =
            Arc::new(FileSink::open(cfg.dead_letter_file.clone(), cfg.downstream.clone()).await?);
        let latencies = Arc::new(Latencies::new());
        // TLS to https:// receivers: rustls with ring (installed once per
        // process; a second call finds it installed), the system's roots.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(cfg.deliver_timeout)
            .pool_max_idle_per_host(cfg.max_in_flight)
            .build()
            .map_err(std::io::Error::other)?;
        let downstream = HttpDownstream {
            client: client.clone(),
            url: cfg.downstream.clone(),
            latencies: latencies.clone(),
            secret: None,
            name: None,
        };
        let mut builder = template(&cfg, &sink, cfg.max_in_flight);
        match (&tenants, cfg.tenant_quota) {
            (Some(store), _) => builder = builder.key_store(store.clone()),
            (None, Some(quota)) => builder = builder.per_key(100_000, quota),
            (None, None) => {}
        }
        if let Some(source) = permits {
            builder = builder.permits(source);
        }
        let idempotency = match &cfg.journal {
            Some(dir) => Idempotency::open(dir, IDEMPOTENCY_WINDOW, IDEMPOTENCY_KEYS)?,
            None => Idempotency::in_memory(IDEMPOTENCY_WINDOW, IDEMPOTENCY_KEYS),
        };
        let journal = match &cfg.journal {
            Some(dir) => Some(Journal::open(dir).map_err(std::io::Error::other)?),
            None => None,
        };
        let recovered = journal.as_ref().map_or(0, Journal::recovered);
        // The journal goes to the destinations when the relay fans out (one
        // journal, each record naming its destination), else to the throttle.
        let (fanout, journal) = match &cfg.fanout {
            Some(f) => {
                // Tenants: one store for every destination (a table per
                // destination would forget a tenant whenever it went idle).
                let mut t = template(&cfg, &sink, f.max_in_flight_per_destination);
                match (&tenants, cfg.tenant_quota) {
                    (Some(store), _) => t = t.key_store(store.clone()),
                    (None, Some(quota)) => {
                        let table = dripfeed::keyed::KeyedBuckets::<String>::new(100_000, quota)
                            .map_err(std::io::Error::other)?;
                        t = t.key_store(Arc::new(table));
                    }
                    (None, None) => {}
                }
                let set = crate::fanout::Fanout::start(f, t, journal, client, latencies.clone())
                    .map_err(std::io::Error::other)?;
                (Some(set), None)
            }
            None => (None, journal),
        };
        if let Some(journal) = journal {
            builder = builder.journal(journal);
        }
        let (throttle, _drain) = builder.build(downstream).map_err(std::io::Error::other)?;
        Ok(Arc::new(Relay {
            fanout,
            throttle,
            budget: ByteBudget::new(cfg.max_queue_bytes),
            sink,
            answers: Answers::default(),
            latencies,
            cfg,
            tenants,
            recovered,
            idempotency,
        }))
    }

    /// Waits until nothing is queued or in flight (or `limit` passes).
    pub async fn drained(&self, limit: Duration) {
        let until = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < until {
            let s = self.throttle.stats();
            if s.depth() == 0 && s.in_flight() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An RFC 9457 problem-details response, with the wait-hint header fields.
pub fn problem(
    status: StatusCode,
    kind: &str,
    detail: String,
    fields: Vec<(&'static str, String)>,
) -> Response {
    let retry_after = fields
        .iter()
        .find(|(k, _)| *k == "retry-after")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let body = json!({
        "type": format!("urn:dripfeed:problem:{kind}"),
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "detail": detail,
        "retry_after": retry_after,
    });
    let mut resp = (status, body.to_string()).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    for (name, value) in fields {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    resp
}

fn refused(relay: &Relay, r: Rejected<Job>) -> Response {
    let fields = headers::for_rejected(&r);
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let (kind, detail) = match r.reason() {
        Reason::Overloaded => {
            bump(&relay.answers.full_503);
            (
                "overloaded",
                "the delivery queue is full; retry later".to_owned(),
            )
        }
        Reason::OverQuota => {
            bump(&relay.answers.quota_429);
            (
                "over-quota",
                "this tenant is over its quota; retry later".to_owned(),
            )
        }
        Reason::Closed => {
            bump(&relay.answers.closed_503);
            ("closed", "the relay is shutting down".to_owned())
        }
        Reason::Unavailable {
            cause: cause @ (Cause::JournalFull | Cause::JournalFailed),
        } => {
            bump(&relay.answers.journal_503);
            let why = match cause {
                Cause::JournalFull => "the relay's journal is full",
                _ => "the relay cannot write its journal",
            };
            ("unavailable", format!("{why}; retry later"))
        }
        Reason::Unavailable { .. } => {
            bump(&relay.answers.store_503);
            (
                "unavailable",
                "the tenant quota store is unavailable; retry later".to_owned(),
            )
        }
        _ => ("invalid", "this webhook can never be admitted".to_owned()),
    };
    problem(status, kind, detail, fields)
}

async fn deliver(
    State(relay): State<Arc<Relay>>,
    headers_in: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let key = headers_in
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let (Some(key), Ok(body)) = (&key, &body) {
        match relay.idempotency.begin(key, body_hash(body)) {
            Begin::New => {}
            Begin::Repeat(id) => {
                let body = json!({"status": "duplicate", "id": id.to_string()});
                return (StatusCode::ACCEPTED, axum::Json(body)).into_response();
            }
            Begin::Conflict => {
                let detail = "this Idempotency-Key was used with another body".to_owned();
                return problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "key-reused",
                    detail,
                    Vec::new(),
                );
            }
            Begin::InProgress => {
                let detail =
                    "a request with this Idempotency-Key is still being admitted".to_owned();
                return problem(StatusCode::CONFLICT, "key-in-progress", detail, Vec::new());
            }
        }
    }
    let refuse = |refusal: Response| {
        if let Some(key) = &key {
            relay.idempotency.refused(key);
        }
        refusal
    };
    let destination = match &relay.fanout {
        Some(fanout) => match fanout.pick(&headers_in) {
            Ok(name) => Some(name),
            Err(refusal) => return refuse(*refusal),
        },
        None => None,
    };
    let job = match job_from(&relay, &headers_in, body) {
        Ok(job) => Job { destination, ..job },
        Err(refusal) => return refuse(*refusal),
    };
    match admit(&relay, job).await {
        Ok(admitted) => {
            if let Some(key) = &key
                && let Err(e) = relay.idempotency.accepted(key, admitted.id()).await
            {
                // The webhook itself is durable; only a repeat after a
                // restart could be taken as new.
                eprintln!("idempotency key not stored: {e}");
            }
            accepted(&relay, admitted)
        }
        Err(refusal) => refuse(*refusal),
    }
}

/// The webhook as a job holding its bytes against the budget, or the
/// answer that refuses it (413, or 503 when the byte budget is spent).
fn job_from(
    relay: &Relay,
    headers_in: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Job, Box<Response>> {
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            bump(&relay.answers.too_large_413);
            let detail = format!("bodies are limited to {MAX_BODY} bytes");
            let too_large = StatusCode::PAYLOAD_TOO_LARGE;
            return Err(Box::new(problem(
                too_large,
                "too-large",
                detail,
                Vec::new(),
            )));
        }
        Err(e) => {
            let bad = problem(e.status(), "bad-body", e.body_text(), Vec::new());
            return Err(Box::new(bad));
        }
    };
    let Some(ticket) = relay.budget.try_take(body.len()) else {
        bump(&relay.answers.bytes_503);
        // Answered like a full queue: the wait until it has drained.
        let wait = headers::retry_after(relay.throttle.retry_after());
        let detail = "the relay holds its byte budget of queued bodies; retry later".to_owned();
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        let fields = vec![("retry-after", wait)];
        return Err(Box::new(problem(unavailable, "overloaded", detail, fields)));
    };
    let text = |name: &str| {
        headers_in
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    Ok(Job {
        content_type: text(header::CONTENT_TYPE.as_str()),
        tenant: text(&relay.cfg.tenant_header),
        body,
        received_unix_ms: unix_ms(),
        trail: Trail::default(),
        destination: None,
        _ticket: Some(ticket),
    })
}

/// The tenant's quota (429), then the queue (503).
async fn admit(relay: &Relay, job: Job) -> Result<Admitted, Box<Response>> {
    let keyed = relay.tenants.is_some() || relay.cfg.tenant_quota.is_some();
    if let (Some(fanout), Some(name)) = (&relay.fanout, job.destination.clone()) {
        // With a journal both answer once the webhook is durable.
        let submitted = match job.tenant.clone() {
            Some(tenant) if keyed => fanout.set.submit_keyed(&name, &tenant, 1.0, job).await,
            _ => fanout.set.try_submit_durable(&name, job).await,
        };
        return submitted.map_err(|r| Box::new(refused(relay, r)));
    }
    let submitted = match job.tenant.clone() {
        // One path whatever the store: the throttle charges the tenant and
        // refunds the charge if the queue refuses.
        // With a journal both answer once the webhook is durable.
        Some(tenant) if keyed => relay.throttle.submit_keyed(&tenant, 1.0, job).await,
        _ => relay.throttle.try_submit_durable(job).await,
    };
    submitted.map_err(|r| Box::new(refused(relay, r)))
}

/// 202, naming the job by the id its receiver sees as `idempotency-key`.
fn accepted(relay: &Relay, admitted: Admitted) -> Response {
    let status = if admitted.is_deferred() {
        bump(&relay.answers.deferred);
        "deferred"
    } else {
        bump(&relay.answers.queued);
        "queued"
    };
    let body = json!({"status": status, "id": admitted.id().to_string()});
    (StatusCode::ACCEPTED, axum::Json(body)).into_response()
}

pub fn router(relay: Arc<Relay>, prometheus: Option<PrometheusHandle>) -> Router {
    Router::new()
        .route("/v1/webhooks/deliver", post(deliver))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let prometheus = prometheus.clone();
                async move {
                    match prometheus {
                        Some(p) => (
                            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                            p.render(),
                        )
                            .into_response(),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                }
            }),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(relay)
}

/// Serves the relay on `addr` until `stop` resolves; returns its address.
pub async fn serve(
    addr: SocketAddr,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await;
    });
    Ok((local, task))
}
