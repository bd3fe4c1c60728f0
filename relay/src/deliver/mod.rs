//! Delivery: each destination's downstream POSTs a webhook to its URL with
//! the same body and content type, the webhook's id as `idempotency-key`,
//! and a Standard Webhooks signature when the destination has a secret; the
//! receiver's answer becomes the library's `Delivery` (2xx done; 408, 429,
//! 5xx and no answer retried, after the receiver's `Retry-After` if it sent
//! one; other statuses final). A delivery the address guard refuses (a
//! private address not allowed) is final too, with no status. Every
//! failed attempt is told in [`errors`]: counted, kept and logged.

pub(crate) mod client;
pub(crate) mod deliveries;
pub(crate) mod endpoint;
pub(crate) mod errors;
pub(crate) mod guard;
pub(crate) mod latency;
pub(crate) mod pool;
pub(crate) mod recent;
pub(crate) mod resolver;
pub(crate) mod signing;
pub(crate) mod target;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, Request, header};
use dripfeed::{Attempt, Delivery, Downstream};
use http_body_util::Full;

use crate::domain::job::{Job, unix_ms};
use crate::status::Registry;
use crate::trace::Ended;
use errors::{AttemptError, Errors};
use latency::Latencies;

/// One destination's deliveries.
pub(crate) struct HttpDownstream {
    /// The shared client.
    pub client: client::Client,
    /// The destination's name.
    pub name: Arc<str>,
    /// The destinations in force: its URL and signing keys are read there
    /// at each attempt (an admin API change applies to the next one); a
    /// destination the journal remembers but no longer held has none, and
    /// its webhooks are dead-lettered.
    pub targets: Arc<dyn target::Targets>,
    /// Where delivery latencies go (the status line's p99).
    pub latencies: Arc<Latencies>,
    /// This destination's recent latencies (the status page's p99).
    pub recent: Arc<recent::Window>,
    /// Where deliveries may connect (checked here for an IP literal; the
    /// client's resolver checks names).
    pub guard: Arc<guard::AddressGuard>,
    /// Where each attempt's start and answer are recorded (`None` with the
    /// shared queue: statuses are kept in Redis, by its scripts).
    pub status: Option<Arc<Registry>>,
    /// Where failed attempts are told (shared with the admin API).
    pub errors: Arc<Errors>,
    /// The tracer, with traces exported: each attempt is a span.
    pub traces: crate::trace::Shared,
    /// Retries after the first attempt (`retries`): which attempt is the
    /// last, for its span.
    pub retries: u32,
    /// The longest wait between attempts (`retry_max`): a receiver's
    /// `Retry-After` is kept for an event's copy up to it.
    pub retry_max: std::time::Duration,
    /// The target its last attempt used, held while the destination has
    /// work (its idle connections with it); let go with the throttle.
    pub held: std::sync::Mutex<Option<Arc<target::Target>>>,
}

#[async_trait::async_trait]
impl Downstream<Job> for HttpDownstream {
    async fn deliver(&self, job: &Job, attempt: Attempt) -> Delivery {
        let Some(copy) = &job.event else {
            return self.traced(job, attempt).await;
        };
        // An event's copy: each attempt kept in the events store, one
        // stopped before its answer too (its future dropped: past its
        // deadline, or the relay stopping at the end of its grace).
        let mut cut_off = CutOff {
            copy,
            at_ms: unix_ms(),
            began: std::time::Instant::now(),
            timeout: self.client.timeout(),
            armed: true,
        };
        let number = attempt.number();
        let delivery = self.traced(job, attempt).await;
        cut_off.armed = false;
        let made = job.trail.attempts() == number;
        let error = (made && !delivery.is_done())
            .then(|| job.trail.last_error())
            .flatten()
            .map(|e| e.split(':').next().unwrap_or_default().to_owned());
        let status = match made {
            true => u16::try_from(job.trail.last_status()).unwrap_or(0),
            false => 0,
        };
        let record = cut_off.record(status, error);
        let ended = delivery
            .is_done()
            .then_some(crate::events::record::CopyState::Delivered);
        // When the receiver asked to be tried again (at most `retry_max`
        // away, as the retry policy waits): a copy sent again at a start
        // waits for it.
        let retry_at_ms = match delivery {
            Delivery::Retry { after: Some(after) } => {
                let after =
                    u64::try_from(after.min(self.retry_max).as_millis()).unwrap_or(u64::MAX);
                Some(unix_ms().saturating_add(after))
            }
            _ => None,
        };
        copy.attempted(record, ended, retry_at_ms);
        delivery
    }
}

/// An event copy's attempt under way: its record once it ends, and, if
/// its future is dropped before its answer, a record of that (`timeout`
/// once it ran as long as an attempt may, else `stopped`).
struct CutOff<'a> {
    copy: &'a crate::domain::event_copy::EventCopy,
    at_ms: u64,
    began: std::time::Instant,
    timeout: std::time::Duration,
    armed: bool,
}

impl CutOff<'_> {
    /// The attempt's record, ended now with `status` (0: no answer).
    fn record(&self, status: u16, error: Option<String>) -> crate::events::record::AttemptRecord {
        crate::events::record::AttemptRecord {
            at_ms: self.at_ms,
            status,
            duration_ms: u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX),
            error,
            response: None,
        }
    }
}

impl Drop for CutOff<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let error = match self.began.elapsed() >= self.timeout {
            true => "timeout",
            false => crate::events::record::STOPPED,
        };
        self.copy
            .attempted(self.record(0, Some(error.to_owned())), None, None);
    }
}

impl HttpDownstream {
    /// One attempt, in its span when traces are exported.
    async fn traced(&self, job: &Job, attempt: Attempt) -> Delivery {
        let Some(traces) = &self.traces else {
            return self.attempt(job, attempt, None).await;
        };
        let public = job.trail.name(attempt.id());
        let span = traces.attempt(job.trace.as_ref(), &self.name, attempt.number(), public);
        let delivery = self.attempt(job, attempt, span.header()).await;
        let then = match &delivery {
            Delivery::Done => Ended::Delivered,
            Delivery::Retry { after } if attempt.number() <= self.retries => Ended::Retry(*after),
            _ => Ended::DeadLettered,
        };
        // What this attempt left on the webhook's trail (an attempt that
        // found no destination left none).
        let made = job.trail.attempts() == attempt.number();
        let status = match made {
            true => u16::try_from(job.trail.last_status()).unwrap_or(0),
            false => 0,
        };
        let error = (made && !delivery.is_done())
            .then(|| job.trail.last_error())
            .flatten();
        span.end(status, error.as_deref(), then);
        delivery
    }

    /// One attempt, carrying `traceparent` when traced.
    async fn attempt(
        &self,
        job: &Job,
        attempt: Attempt,
        traceparent: Option<HeaderValue>,
    ) -> Delivery {
        let trail = &job.trail;
        trail.tried_by(&self.name);
        let Some(target) = self.targets.target(&self.name) else {
            return Delivery::Failed;
        };
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(target.clone());
        let Some(endpoint) = &target.endpoint else {
            // Checked at configuration: unreachable, but never silent.
            trail.attempted(attempt.number(), 0);
            let why = "the destination's URL cannot be sent to";
            self.failed(job, &attempt, &AttemptError::refused(&why));
            return Delivery::Failed;
        };
        // The id the 202 named (or, redriven, the id it had before).
        let public = trail.name(attempt.id());
        if let Some(status) = self.status.as_ref().filter(|_| job.event.is_none()) {
            status.started(
                attempt,
                public,
                job.tenant.as_deref(),
                &self.name,
                job.received_unix_ms,
            );
        }
        if let Some(ip) = target.literal
            && let Err(refused) = self.guard.check(ip)
        {
            return self.refused(job, &attempt, refused);
        }
        let mut req = request(endpoint, &target.secrets, job, public);
        if let Some(traceparent) = traceparent {
            req.headers_mut().insert("traceparent", traceparent);
        }
        let (answer, took) = self.client.send(endpoint, req).await;
        self.latencies.record(took);
        self.recent.record(tokio::time::Instant::now(), took);
        let status = answer.as_ref().map_or(0, |a| a.status.as_u16());
        trail.attempted(attempt.number(), status);
        if status != 0
            && job.event.is_none()
            && let Some(registry) = &self.status
        {
            registry.answered(attempt.id(), status);
        }
        match answer {
            Ok(a) if a.status.is_success() => Delivery::Done,
            Ok(a) => {
                self.failed(job, &attempt, &AttemptError::status(status));
                match status {
                    // The throttle caps a hint at the retry policy's longest backoff.
                    408 | 429 | 500..=599 => Delivery::Retry {
                        after: a.retry_after,
                    },
                    _ => Delivery::Failed, // other statuses are final
                }
            }
            Err(e) => match guard::refusal(&e) {
                Some(refused) => self.refused(job, &attempt, refused),
                None => {
                    self.failed(job, &attempt, &AttemptError::of(&e));
                    Delivery::Retry { after: None }
                }
            },
        }
    }
}

/// What every delivery says it comes from.
const USER_AGENT: HeaderValue =
    HeaderValue::from_static(concat!("dripfeed-relay/", env!("CARGO_PKG_VERSION")));

/// The POST of `job` to `endpoint`: its body and content type, the webhook's
/// public `id` as `idempotency-key`, and with `secrets` a Standard Webhooks
/// signature made now.
fn request(
    endpoint: &endpoint::Endpoint,
    secrets: &[Arc<[u8]>],
    job: &Job,
    id: u64,
) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(job.body.clone()));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = endpoint.origin.clone();
    let id_value = HeaderValue::from(id);
    let headers = req.headers_mut();
    headers.insert(header::HOST, endpoint.host.clone());
    if let Some(credentials) = &endpoint.authorization {
        headers.insert(header::AUTHORIZATION, credentials.clone());
    }
    headers.insert(header::USER_AGENT, USER_AGENT);
    headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    // The type came in a request's header: only a value that is not one
    // any more (unreachable) would be left out.
    if let Some(ct) = &job.content_type
        && let Ok(ct) = HeaderValue::from_str(ct)
    {
        headers.insert(header::CONTENT_TYPE, ct);
    }
    if !secrets.is_empty() {
        // Signed again on every attempt, with the time of the attempt;
        // with every key, space-separated, while a secret is replaced.
        let ts = unix_ms() / 1000;
        let id = id.to_string();
        let signatures: Vec<String> = secrets
            .iter()
            .map(|key| signing::sign(key, &id, ts, &job.body))
            .collect();
        // `v1,` and base64, space-separated: always a valid value.
        if let Ok(value) = HeaderValue::try_from(signatures.join(" ")) {
            headers.insert("webhook-signature", value);
        }
        headers.insert("webhook-timestamp", HeaderValue::from(ts));
        headers.insert("webhook-id", id_value.clone());
    }
    if let Some(copy) = &job.event {
        // An event's copy names its event on every attempt, signed or not.
        headers.insert("webhook-id", id_value.clone());
        if let Ok(kind) = HeaderValue::from_str(&copy.kind) {
            headers.insert("webhook-event-type", kind);
        }
    }
    headers.insert("idempotency-key", id_value);
    req
}

impl HttpDownstream {
    /// A delivery the guard refused: final, no status, told with why.
    fn refused(&self, job: &Job, attempt: &Attempt, refused: guard::Refused) -> Delivery {
        job.trail.attempted(attempt.number(), 0);
        let why = format!("{refused} (allow_destination_cidrs)");
        self.failed(job, attempt, &AttemptError::refused(&why));
        Delivery::Failed
    }

    /// Tells an attempt's failure: the webhook's last error (its trail,
    /// its status), the destination's, counted and logged.
    fn failed(&self, job: &Job, attempt: &Attempt, error: &AttemptError) {
        let text = error.text();
        job.trail.failed(&text);
        if let Some(registry) = self.status.as_ref().filter(|_| job.event.is_none()) {
            registry.failed(attempt.id(), error.kind.as_str(), &text);
        }
        let own = self
            .targets
            .target(&self.name)
            .is_some_and(|t| t.own_series);
        let label = if own {
            &*self.name
        } else {
            dripfeed::destinations::OTHER
        };
        self.errors.record(&self.name, label, error);
    }
}

/// A receiver's `Retry-After`: seconds, or an HTTP date (the wait until it).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_carries_its_id_type_credentials_and_signature() {
        let endpoint = endpoint::Endpoint::parse("https://u:p@example.com:8443/in").unwrap();
        let mut job = Job::raw(Bytes::from_static(b"{\"a\":1}"));
        job.content_type = Some("application/json".into());
        let key: Arc<[u8]> = Arc::from(&b"key"[..]);
        let req = request(&endpoint, std::slice::from_ref(&key), &job, 42);
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.uri(), "/in");
        let h = req.headers();
        assert_eq!(h["host"], "example.com:8443");
        assert_eq!(h["authorization"], "Basic dTpw"); // base64 of "u:p"
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["idempotency-key"], "42");
        assert_eq!(h["webhook-id"], "42");
        let ts: u64 = h["webhook-timestamp"].to_str().unwrap().parse().unwrap();
        let expected = signing::sign(&key, "42", ts, b"{\"a\":1}");
        assert_eq!(h["webhook-signature"], expected.as_str());
        assert!(
            h["user-agent"]
                .to_str()
                .unwrap()
                .starts_with("dripfeed-relay/")
        );

        // Unsigned without a secret, and no credentials without user info.
        let endpoint = endpoint::Endpoint::parse("http://example.com/in").unwrap();
        let req = request(&endpoint, &[], &job, 7);
        assert!(req.headers().get("webhook-signature").is_none());
        assert!(req.headers().get("authorization").is_none());
        assert_eq!(req.headers()["host"], "example.com");
    }
}
