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
//! - **Delivery**: each relay's drain for a destination takes a delivery
//!   place, waits for its pacing and a permit of the destination's bucket
//!   in Redis (at the destination's rate: the fleet together delivers at
//!   most that), and only then claims one entry, so an entry is in a
//!   relay's hands only while it is delivered. Acknowledgements go in
//!   batches, retried until Redis takes them. A retry waits in Redis by its
//!   due time and comes back through whichever relay moves it first; a
//!   webhook past its retries or refused for good goes to this relay's
//!   dead-letter file, and is acknowledged once its line is on disk (while
//!   the file fails, it stays pending and is tried again once taken over:
//!   a second delivery rather than a loss).
//! - **A dead node**: its pending entries are reclaimed (`XAUTOCLAIM`) once
//!   idle for the deliver timeout plus five seconds: never sooner, which is
//!   how duplicates happen; a holder that was too slow cannot retry an
//!   entry taken over from it.
//!
//! A webhook's id is a random 64-bit number given at admission and kept in
//! its entry (stream ids are per destination, so not unique in the fleet).

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

/// Acknowledgements sent together at most.
const ACK_BATCH: usize = 256;
/// How long an idle drain waits before it asks for work again.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// An entry's id as the webhook's number (ids are given as numbers; an
/// entry written otherwise is known by its stream id `MS-SEQ`, as
/// `MS × 2^20 + SEQ`).
pub fn number_of(id: &str) -> u64 {
    if let Ok(n) = id.parse() {
        return n;
    }
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
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
    /// Queued, but fewer replicas than asked confirmed it: how many did.
    Unconfirmed(u64),
}

/// The fleet's queues, one per configured destination.
pub struct Shared {
    lanes: HashMap<String, Lane>,
    remember: Duration,
    conn: RedisConnection,
    /// The drains, stopped by [`finish`](Self::finish).
    drains: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    stop: tokio::sync::watch::Sender<bool>,
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
    pub async fn open(cfg: &Config, node: &str) -> Result<Shared, String> {
        let s = &cfg.settings;
        let url = s.redis.as_ref().ok_or("queue = redis needs redis")?;
        let conn = super::redis_link::connect(url.as_str()).await?;
        let lanes = cfg
            .destinations
            .iter()
            .map(|d| {
                let rate = d.rate.unwrap_or(s.drain_rate);
                let budget = d.budget.unwrap_or(s.latency_budget);
                let bound = (budget.as_secs_f64() * rate).ceil().max(1.0) as u64;
                let lane = Lane {
                    queue: RedisQueue::new(conn.clone(), &d.name, node)
                        .with_replicas(s.redis_wait_replicas, Duration::from_millis(200)),
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
            drains: std::sync::Mutex::new(Vec::new()),
            stop: tokio::sync::watch::channel(false).0,
        })
    }

    /// Whether Redis answers (`/readyz`): one destination's depth read.
    pub async fn ping(&self) -> Result<(), String> {
        match self.lanes.values().next() {
            Some(lane) => lane
                .queue
                .depth()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
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
        let id = fastrand::u64(1..).to_string();
        let answer = lane
            .queue
            .admit(&id, &bytes, key, lane.bound, self.remember)
            .await
            .map_err(|e| e.to_string())?;
        Ok(match answer {
            Admission::Added { id, .. } => Admit::Queued(number_of(&id)),
            Admission::Repeat { id } => Admit::Repeat(number_of(&id)),
            Admission::Unconfirmed { replicas, .. } => Admit::Unconfirmed(replicas),
            Admission::Full { depth } => Admit::Full(Duration::from_secs_f64(
                (depth as f64 / lane.rate).min(3600.0),
            )),
        })
    }

    /// Starts one drain per destination, each emitting through the fleet's
    /// permits for that destination (a bucket in Redis at its rate: the
    /// fleet together delivers at most the rate, not each relay).
    pub fn spawn(&self, cfg: &Config, drains: Drains) -> Result<(), String> {
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
            let task = tokio::spawn(d.run(self.stop.subscribe()));
            self.drains
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(task);
        }
        Ok(())
    }

    /// At shutdown, before the dead-letter file is flushed: the drains
    /// claim nothing more and end the deliveries they hold (within
    /// `grace`), their acknowledgements sent.
    pub async fn finish(&self, grace: Duration) {
        let _ = self.stop.send(true);
        let tasks = std::mem::take(&mut *self.drains.lock().unwrap_or_else(|p| p.into_inner()));
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!(
                "shared queue: deliveries still running at the end of the grace are taken over by the fleet"
            );
        }
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
    /// Until stopped: a place, the pacing, a permit, then one entry (a due
    /// retry moved back and a dead relay's entries taken over once a
    /// second), delivered in a task of its own. Once stopped, waits for its
    /// deliveries and their acknowledgements.
    ///
    /// An idle drain (its last claim found nothing) claims before it takes
    /// a permit, and takes none while nothing comes: the fleet's permits it
    /// leased go back to Redis unused, rather than idle relays each keeping
    /// a few for the next burst (three relays would deliver the bucket's
    /// burst plus their pools at once).
    async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let this = Arc::new(self);
        let (acks, ack_rx) = mpsc::unbounded_channel();
        let acker = tokio::spawn(acknowledge(this.lane.queue.clone(), ack_rx));
        let interval = Duration::from_secs_f64(1.0 / this.lane.rate.max(0.001));
        let idle = this.timeout + Duration::from_secs(5);
        let mut upkeep = Instant::now();
        let mut next = Instant::now();
        // Where the take-over scan of the pending list goes on from.
        let mut cursor = "0-0".to_owned();
        let mut quiet = true;
        let cap = u32::try_from(this.in_flight.available_permits()).unwrap_or(u32::MAX);
        'run: loop {
            if *stop.borrow() {
                break;
            }
            let place = tokio::select! {
                p = this.in_flight.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = stop.changed() => break,
            };
            // Paced: one emission per interval, never a burst for time lost.
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = stop.changed() => break,
            }
            next = next.max(Instant::now()) + interval;
            let mut permit = None;
            if !quiet {
                match this.permit(&mut stop).await {
                    Some(p) => permit = Some(p),
                    None => break 'run,
                }
            }
            let q = &this.lane.queue;
            let mut entry = None;
            if upkeep <= Instant::now() {
                upkeep = Instant::now() + Duration::from_secs(1);
                if let Err(e) = q.promote_due(256).await {
                    tracing::debug!(error = %e, "shared queue: retries not moved");
                }
                match q.reclaim_from(&cursor, idle, 1).await {
                    Ok((next, mut taken)) => {
                        cursor = next;
                        if let Some(e) = taken.pop() {
                            tracing::info!(id = %e.id, "shared queue: took over a webhook a relay left pending");
                            upkeep = Instant::now(); // more may be waiting
                            entry = Some(e);
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "shared queue: nothing reclaimed"),
                }
            }
            if entry.is_none() {
                match q.claim(1).await {
                    Ok(mut got) => entry = got.pop(),
                    Err(e) => {
                        // Not given back: a permit is not carried through
                        // a Redis failure (the bucket drains meanwhile).
                        if let Some(p) = permit {
                            p.spend();
                        }
                        tracing::warn!(error = %e, "shared queue: cannot claim webhooks; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                }
            }
            let Some(entry) = entry else {
                // Unspent: back to the pool, and to Redis once the drain
                // has stayed quiet for the lease's lifetime.
                drop(permit);
                drop(place);
                quiet = true;
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = stop.changed() => break,
                }
                continue;
            };
            quiet = false;
            let permit = match permit {
                Some(p) => p,
                // Waking up: the entry is held while the permit comes (a
                // lease away, far within the take-over time).
                None => match this.permit(&mut stop).await {
                    Some(p) => p,
                    None => {
                        // Stopping: left pending, taken over by the fleet.
                        break 'run;
                    }
                },
            };
            permit.spend();
            let (this, acks) = (this.clone(), acks.clone());
            tokio::spawn(async move {
                this.deliver(entry, &acks).await;
                drop(place);
            });
        }
        // Every place back: the deliveries under way have ended.
        let _ = this.in_flight.acquire_many(cap).await;
        drop(acks);
        let _ = acker.await;
    }

    /// A permit of the fleet's bucket, or `None` once stopped.
    async fn permit(
        &self,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<dripfeed::Permit<'_>> {
        loop {
            if let Some(permit) = self.permits.try_take() {
                return Some(permit);
            }
            tokio::select! {
                _ = self.permits.ready() => {}
                _ = stop.changed() => return None,
            }
        }
    }

    /// One attempt, and what follows from its answer.
    async fn deliver(&self, entry: Claimed, acks: &mpsc::UnboundedSender<String>) {
        let job = match Job::decode(&entry.job) {
            Ok(job) => job,
            Err(e) => {
                // Another version's encoding, or damage: kept as it is, in
                // the dead-letter file, not dropped.
                tracing::error!(id = %entry.id, error = %e, "shared queue: an entry does not decode; dead-lettered as it is");
                let raw = Job::raw(entry.job.clone().into());
                raw.trail.name(number_of(&entry.id));
                raw.trail.tried_by(&self.downstream.name);
                self.dead_letter(raw, "undecodable", entry.stream_id, acks)
                    .await;
                return;
            }
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
                    // Left pending: taken over and tried again later.
                    tracing::warn!(error = %e, "shared queue: a retry could not be scheduled");
                }
            }
            Delivery::Retry { .. } => {
                self.dead_letter(job, "retries_exhausted", entry.stream_id, acks)
                    .await
            }
            Delivery::Failed => self.dead_letter(job, "failed", entry.stream_id, acks).await,
        }
    }

    /// Dead-letters `job` and acknowledges its entry once the line is on
    /// disk; held (a full or failing file), the entry stays pending and is
    /// taken over and tried again later rather than lost.
    async fn dead_letter(
        &self,
        job: Job,
        reason: &'static str,
        stream_id: String,
        acks: &mpsc::UnboundedSender<String>,
    ) {
        if self.sink.offer(job, reason).is_err() {
            tracing::error!(
                "the dead-letter writer is gone: the webhook stays in the shared queue"
            );
            return;
        }
        let flushed = self.sink.flushed().await;
        if flushed.held == 0 && flushed.error.is_none() {
            let _ = acks.send(stream_id);
        }
    }
}

/// Acknowledges what the drain ended, in batches (one round trip for all
/// that ended meanwhile), retrying a batch for about two minutes: an
/// acknowledgement given up (or later than the take-over time) has the
/// webhook delivered again, with the same idempotency key.
async fn acknowledge(queue: RedisQueue, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while rx.recv_many(&mut batch, ACK_BATCH).await > 0 {
        let mut wait = Duration::from_millis(50);
        for _ in 0..40 {
            match queue.ack(&batch).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, entries = batch.len(), "shared queue: acknowledgements not taken; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_number_or_its_stream_ids() {
        assert_eq!(
            number_of("12345678901234567890"),
            12_345_678_901_234_567_890
        );
        assert_eq!(number_of("1700000000000-0"), 1_700_000_000_000 << 20);
        assert_eq!(number_of("1700000000000-5"), (1_700_000_000_000 << 20) | 5);
        assert!(number_of("1700000000001-0") > number_of("1700000000000-9"));
    }
}
