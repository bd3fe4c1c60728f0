//! `queue = redis`: every relay of a fleet takes webhooks into one queue
//! per destination in Redis Streams ([`dripfeed::global::RedisQueue`]) and
//! delivers from it, so a node that dies loses nothing: the others reclaim
//! what it had taken once it has been pending longer than a delivery can
//! take.
//!
//! - **Intake**: one script per webhook checks the tenant-scoped
//!   idempotency key, the fleet-wide bound (latency budget × the
//!   destination's rate) and adds the entry; the 202 is answered once Redis
//!   has it. A full queue answers 503 with a `Retry-After` from the fleet's
//!   depth and rate; Redis unreachable answers 503 too (never a 202 it
//!   cannot keep).
//! - **Delivery**: each relay's drain for a destination claims a few
//!   entries at a time, only as its pacing is about to emit them, emits at
//!   the destination's rate (with `global_rate`, through the fleet's shared
//!   permits), and acknowledges in batches. A retry waits in Redis by its
//!   due time and comes back through whichever relay moves it first; a
//!   webhook past its retries or refused for good goes to this relay's
//!   dead-letter file.
//! - **A dead node**: its pending entries are reclaimed (`XAUTOCLAIM`) once
//!   idle for the buffer's worth of time at the rate, plus the deliver
//!   timeout, plus two seconds: never sooner, which is how duplicates
//!   happen.
//!
//! The webhook's id is its stream id (`MS-SEQ`) as one number:
//! `MS × 2^20 + SEQ`.

#![cfg(feature = "redis")]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::global::{Admission, Claimed, Failure, RedisConnection, RedisQueue, RedisRate};
use dripfeed::journal::JobCodec;
use dripfeed::{Attempt, Delivery, Downstream, PermitSource};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use crate::config::Config;
use crate::dead_letter::FileSink;
use crate::deliver::HttpDownstream;
use crate::intake::job::Job;

/// Entries a drain claims at once: its local buffer.
const BUFFER: usize = 4;
/// Acknowledgements sent together at most.
const ACK_BATCH: usize = 256;

/// A stream id (`MS-SEQ`) as the webhook's number.
pub fn number_of(stream_id: &str) -> u64 {
    let (ms, seq) = stream_id.split_once('-').unwrap_or((stream_id, "0"));
    let ms: u64 = ms.parse().unwrap_or(0);
    let seq: u64 = seq.parse().unwrap_or(0);
    (ms << 20) | (seq & 0xF_FFFF)
}

/// One destination's queue and what bounds it.
#[derive(Clone)]
struct Lane {
    queue: RedisQueue,
    rate: f64,
    bound: u64,
}

/// What admission answered.
pub enum Admit {
    /// Queued: the webhook's id.
    Queued(u64),
    /// The idempotency key was seen: the first webhook's id.
    Repeat(u64),
    /// The fleet's queue for it is full: retry after this.
    Full(Duration),
}

/// The fleet's queues, one per configured destination.
pub struct Shared {
    lanes: HashMap<String, Lane>,
    remember: Duration,
    conn: RedisConnection,
}

/// What the drains need from the relay.
pub struct Drains {
    /// Deliveries, one downstream per destination.
    pub downstream: Arc<dyn Fn(&str) -> HttpDownstream + Send + Sync>,
    /// Where webhooks past their retries go.
    pub sink: Arc<FileSink>,
}

impl Shared {
    /// The queues of `cfg`'s destinations, read as `node`.
    pub fn open(cfg: &Config, node: &str) -> Result<Shared, String> {
        let s = &cfg.settings;
        let url = s.redis.as_ref().ok_or("queue = redis needs redis")?;
        let conn = RedisConnection::open(url.as_str()).map_err(|e| format!("redis: {e}"))?;
        let lanes = cfg
            .destinations
            .iter()
            .map(|d| {
                let rate = d.rate.unwrap_or(s.drain_rate);
                let budget = d.budget.unwrap_or(s.latency_budget);
                let bound = (budget.as_secs_f64() * rate).ceil().max(1.0) as u64;
                let lane = Lane {
                    queue: RedisQueue::new(conn.clone(), &d.name, node),
                    rate,
                    bound,
                };
                (d.name.clone(), lane)
            })
            .collect();
        Ok(Shared {
            lanes,
            remember: s.idempotency_window,
            conn,
        })
    }

    /// Queues `job` for `destination` (the idempotency key already scoped
    /// by tenant); `Err` says why Redis could not take it.
    pub async fn admit(
        &self,
        destination: &str,
        job: &Job,
        key: Option<&str>,
    ) -> Result<Admit, String> {
        let lane = self
            .lanes
            .get(destination)
            .ok_or("not a destination of the shared queue")?;
        let mut bytes = Vec::with_capacity(job.body.len() + 64);
        job.encode(&mut bytes);
        let answer = lane
            .queue
            .admit(&bytes, key, lane.bound, self.remember)
            .await
            .map_err(|e| e.to_string())?;
        Ok(match answer {
            Admission::Added { id, .. } => Admit::Queued(number_of(&id)),
            Admission::Repeat { id } => Admit::Repeat(number_of(&id)),
            Admission::Full { depth } => Admit::Full(Duration::from_secs_f64(
                (depth as f64 / lane.rate).min(3600.0),
            )),
        })
    }

    /// Starts one drain per destination, each emitting through the fleet's
    /// permits for that destination (a bucket in Redis at its rate: the
    /// fleet together delivers at the rate, not each relay); they end once
    /// `stop` says so.
    pub fn spawn(
        &self,
        cfg: &Config,
        drains: Drains,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), String> {
        let s = &cfg.settings;
        for (name, lane) in &self.lanes {
            let permits = RedisRate::builder(
                self.conn.clone(),
                format!("webhook_relay:queue:{{{name}}}"),
                lane.rate,
            )
            .name("webhook_relay_queue")
            .on_failure(Failure::FailClosed)
            .start()
            .map_err(|e| format!("the fleet's rate for {name}: {e}"))?;
            let d = Drain {
                lane: lane.clone(),
                downstream: Arc::new((drains.downstream)(name)),
                sink: drains.sink.clone(),
                permits: Arc::new(permits),
                retries: s.retries,
                retry_min: s.retry_min,
                retry_max: s.retry_max,
                timeout: s.deliver_timeout + Duration::from_secs(1),
                in_flight: Arc::new(Semaphore::new(
                    s.per_destination_cap(cfg.destinations.len()),
                )),
            };
            tokio::spawn(d.run(stop.clone()));
        }
        Ok(())
    }
}

/// One destination's drain on this relay.
struct Drain {
    lane: Lane,
    downstream: Arc<HttpDownstream>,
    sink: Arc<FileSink>,
    permits: Arc<dyn PermitSource>,
    retries: u32,
    retry_min: Duration,
    retry_max: Duration,
    timeout: Duration,
    in_flight: Arc<Semaphore>,
}

impl Drain {
    async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let this = Arc::new(self);
        let (acks, ack_rx) = mpsc::unbounded_channel();
        tokio::spawn(acknowledge(this.lane.queue.clone(), ack_rx));
        let interval = Duration::from_secs_f64(1.0 / this.lane.rate.max(0.001));
        let idle = Duration::from_secs_f64(BUFFER as f64 / this.lane.rate.max(0.001))
            + this.timeout
            + Duration::from_secs(2);
        let mut buffer: std::collections::VecDeque<Claimed> = Default::default();
        let mut upkeep = Instant::now();
        let mut next = Instant::now();
        loop {
            if *stop.borrow() {
                return;
            }
            if upkeep <= Instant::now() {
                upkeep = Instant::now() + Duration::from_secs(1);
                let q = &this.lane.queue;
                if let Err(e) = q.promote_due(256).await {
                    tracing::debug!(error = %e, "shared queue: retries not moved");
                }
                match q.reclaim(idle, BUFFER).await {
                    Ok(taken) if !taken.is_empty() => {
                        tracing::info!(
                            entries = taken.len(),
                            "shared queue: took over webhooks a relay left pending"
                        );
                        buffer.extend(taken);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "shared queue: nothing reclaimed"),
                }
            }
            if buffer.is_empty() {
                match this.lane.queue.claim(BUFFER).await {
                    Ok(got) if !got.is_empty() => buffer.extend(got),
                    Ok(_) => {
                        let wait = Duration::from_millis(20).min(upkeep - Instant::now());
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = stop.changed() => return,
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "shared queue: cannot claim webhooks; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                }
            }
            // Paced: one emission per interval, never a burst for time lost.
            tokio::time::sleep_until(next).await;
            next = (next + interval).max(Instant::now() - interval);
            loop {
                if let Some(permit) = this.permits.try_take() {
                    permit.spend();
                    break;
                }
                tokio::select! {
                    _ = this.permits.ready() => {}
                    _ = stop.changed() => return,
                }
            }
            let Ok(place) = this.in_flight.clone().acquire_owned().await else {
                return;
            };
            let Some(entry) = buffer.pop_front() else {
                continue;
            };
            let (this, acks) = (this.clone(), acks.clone());
            tokio::spawn(async move {
                this.deliver(entry, &acks).await;
                drop(place);
            });
        }
    }

    /// One attempt, and what follows from its answer.
    async fn deliver(&self, entry: Claimed, acks: &mpsc::UnboundedSender<String>) {
        let Ok(job) = Job::decode(&entry.job) else {
            tracing::error!(id = %entry.id, "shared queue: an entry does not decode; dropped");
            let _ = acks.send(entry.stream_id);
            return;
        };
        let public = number_of(&entry.id);
        job.trail.name(public);
        let attempt = Attempt::new(public, entry.attempts + 1);
        let answer = tokio::time::timeout(self.timeout, self.downstream.deliver(&job, attempt))
            .await
            .unwrap_or(Delivery::Retry { after: None });
        let made = entry.attempts + 1;
        match answer {
            Delivery::Done => {
                let _ = acks.send(entry.stream_id);
            }
            Delivery::Retry { after } if made <= self.retries => {
                let backoff = self
                    .retry_min
                    .saturating_mul(1 << made.min(16).saturating_sub(1));
                let wait = after
                    .unwrap_or(backoff.min(self.retry_max))
                    .min(self.retry_max);
                let jittered = wait.mul_f64(0.5 + fastrand::f64() / 2.0);
                if let Err(e) = self.lane.queue.retry(&entry, jittered).await {
                    // Left pending: reclaimed and tried again later.
                    tracing::warn!(error = %e, "shared queue: a retry could not be scheduled");
                }
            }
            _ => {
                let reason = match answer {
                    Delivery::Retry { .. } => "retries_exhausted",
                    _ => "failed",
                };
                if self.sink.offer(job, reason).is_err() {
                    tracing::error!("the dead-letter writer is gone: a webhook was dropped");
                }
                let _ = acks.send(entry.stream_id);
            }
        }
    }
}

/// Acknowledges what the drain ended, in batches: less than one round trip
/// per webhook.
async fn acknowledge(queue: RedisQueue, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while rx.recv_many(&mut batch, ACK_BATCH).await > 0 {
        // Unacknowledged after an error: reclaimed later and delivered again
        // (the receiver sees the same idempotency key).
        if let Err(e) = queue.ack(&batch).await {
            tracing::warn!(error = %e, entries = batch.len(), "shared queue: acknowledgements lost");
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_id_is_one_number() {
        assert_eq!(number_of("1700000000000-0"), 1_700_000_000_000 << 20);
        assert_eq!(number_of("1700000000000-5"), (1_700_000_000_000 << 20) | 5);
        assert!(number_of("1700000000001-0") > number_of("1700000000000-9"));
    }
}
