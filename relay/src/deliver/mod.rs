//! Delivery: each destination's downstream POSTs a webhook to its URL with
//! the same body and content type, the webhook's id as `idempotency-key`,
//! and a Standard Webhooks signature when the destination has a secret; the
//! receiver's answer becomes the library's `Delivery` (2xx done; 408, 429,
//! 5xx and no answer retried, after the receiver's `Retry-After` if it sent
//! one; other statuses final). A delivery the address guard refuses (a
//! private address not allowed) is final too, with no status.

pub mod client;
pub mod guard;
pub mod latency;
pub mod resolver;
pub mod signing;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, header};
use dripfeed::{Attempt, Delivery, Downstream};

use crate::catalog::Catalog;
use crate::intake::job::{Job, unix_ms};
use crate::status::Registry;
use latency::Latencies;

/// One destination's deliveries.
pub struct HttpDownstream {
    /// The shared client.
    pub client: reqwest::Client,
    /// The destination's name.
    pub name: Arc<str>,
    /// The destinations in force: its URL and signing keys are read there
    /// at each attempt (an admin API change applies to the next one); a
    /// destination the journal remembers but the catalog no longer holds
    /// has none, and its webhooks are dead-lettered.
    pub catalog: Arc<Catalog>,
    /// Where delivery latencies go (the status line's p99).
    pub latencies: Arc<Latencies>,
    /// Where deliveries may connect (checked here for an IP literal; the
    /// client's resolver checks names).
    pub guard: Arc<guard::AddressGuard>,
    /// Where each attempt's start and answer are recorded (`None` with the
    /// shared queue: statuses are kept in Redis, by its scripts).
    pub status: Option<Arc<Registry>>,
}

#[async_trait::async_trait]
impl Downstream<Job> for HttpDownstream {
    async fn deliver(&self, job: &Job, attempt: Attempt) -> Delivery {
        let trail = &job.trail;
        trail.tried_by(&self.name);
        let Some(target) = self.catalog.target(&self.name) else {
            return Delivery::Failed;
        };
        let Some(url) = target.parsed.clone() else {
            return Delivery::Failed; // checked at configuration: unreachable
        };
        // The id the 202 named (or, redriven, the id it had before).
        let public = trail.name(attempt.id());
        if let Some(status) = &self.status {
            status.started(
                attempt,
                public,
                job.tenant.as_deref(),
                &self.name,
                job.received_unix_ms,
            );
        }
        let id = public.to_string();
        let mut req = self
            .client
            .post(url)
            .header("idempotency-key", &id)
            .body(job.body.clone());
        if let Some(ct) = &job.content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        if !target.secrets.is_empty() {
            // Signed again on every attempt, with the time of the attempt;
            // with every key, space-separated, while a secret is replaced.
            let ts = unix_ms() / 1000;
            let signatures: Vec<String> = target
                .secrets
                .iter()
                .map(|key| signing::sign(key, &id, ts, &job.body))
                .collect();
            req = req
                .header("webhook-id", &id)
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", signatures.join(" "));
        }
        if let Some(ip) = target.literal
            && let Err(refused) = self.guard.check(ip)
        {
            return self.refused(job, &attempt, refused);
        }
        let started = std::time::Instant::now();
        let answer = req.send().await;
        self.latencies.record(started.elapsed());
        let status = answer.as_ref().map_or(0, |r| r.status().as_u16());
        trail.attempted(attempt.number(), status);
        if status != 0
            && let Some(registry) = &self.status
        {
            registry.answered(attempt.id(), status);
        }
        match answer {
            Ok(resp) if resp.status().is_success() => Delivery::Done,
            Ok(resp) => match status {
                // The throttle caps a hint at the retry policy's longest backoff.
                408 | 429 | 500..=599 => Delivery::Retry {
                    after: retry_after(resp.headers()),
                },
                _ => Delivery::Failed, // other statuses are final
            },
            Err(e) => match guard::refusal(&e) {
                Some(refused) => self.refused(job, &attempt, refused),
                None => {
                    tracing::debug!(destination = %self.name, error = %e, "delivery failed");
                    Delivery::Retry { after: None }
                }
            },
        }
    }
}

impl HttpDownstream {
    /// A delivery the guard refused: final, no status, logged with why.
    fn refused(&self, job: &Job, attempt: &Attempt, refused: guard::Refused) -> Delivery {
        job.trail.attempted(attempt.number(), 0);
        job.trail.refuse(&format!("refused: {refused}"));
        tracing::warn!(
            destination = %self.name,
            reason = %refused,
            "delivery refused: the destination's address is not allowed (allow_destination_cidrs)"
        );
        Delivery::Failed
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
