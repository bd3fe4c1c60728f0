//! One destination's drain on one relay of a fleet sharing the queue in
//! Redis ([`super::shared`]): a place, the pacing, a permit of the fleet's
//! bucket, then an entry (claimed a moment ahead), delivered; what ended is
//! acknowledged in batches.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::redis::queue::{Claimed, RedisQueue};
use super::redis::queue_status::Ending;
use dripfeed::journal::JobCodec;
use dripfeed::{Attempt, Delivery, Downstream, PermitSource};
use futures_util::FutureExt as _;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::breaker::{FleetBreaker, Pass};
use super::lane::{Lane, number_of};
use super::steer::{self, Steering};
use crate::deliver::HttpDownstream;
use crate::domain::job::Job;
use crate::util::mutex::lock;

/// Acknowledgements sent together at most.
const ACK_BATCH: usize = 256;
/// How far ahead a drain claims: the entries it will emit in this time.
const CLAIM_AHEAD: Duration = Duration::from_millis(50);
/// Entries one claim takes at most.
const MAX_CLAIM: usize = 64;

/// Pages of [`MAX_CLAIM`] entries a drain reads of its own pending list
/// after a claim went unanswered (what it holds is in it too).
const OWN_PAGES: usize = 64;
/// How far ahead of its slot an emission may go (one timer tick).
const PACE_SLACK: Duration = Duration::from_millis(1);
/// How long acknowledgements wait for company before they are sent.
const ACK_LINGER: Duration = Duration::from_millis(5);
/// An entry held longer than this before it is sent is claimed afresh
/// first ([`RedisQueue::hold`]).
const HOLD_REFRESH: Duration = Duration::from_secs(1);
/// Take-overs of one entry after which it is dead-lettered (`abandoned`):
/// each means a relay died or hung holding it.
const TAKEN_OVER_MAX: u64 = 3;
/// How long an idle drain waits before it asks for work again.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// How long a drain stays quiet, its destination's queue empty
/// fleet-wide, before it ends (sleeps): an admission wakes it again
/// ([`super::wake`]).
pub(super) const SLEEP_AFTER: Duration = Duration::from_secs(10);
/// While the fleet's breaker is open, how often at least and at most the
/// drain looks at it again.
const BREAKER_MIN_WAIT: Duration = Duration::from_millis(50);
const BREAKER_MAX_WAIT: Duration = Duration::from_secs(1);

/// How long an entry must have been pending before another relay takes it
/// over, for a drain whose attempts end within `timeout`: the attempt, what
/// a drain claims ahead, and five seconds' margin. Never sooner: that is
/// how duplicates happen.
pub(super) fn take_over_idle(timeout: Duration) -> Duration {
    timeout + CLAIM_AHEAD + Duration::from_secs(5)
}

/// One destination's drain on this relay.
pub(super) struct Drain {
    pub(super) lane: Lane,
    /// The fleet's breaker for its destination, as this relay sees it.
    pub(super) breaker: Arc<FleetBreaker>,
    pub(super) downstream: Arc<HttpDownstream>,
    pub(super) permits: Arc<dyn PermitSource>,
    pub(super) retries: u32,
    pub(super) retry_min: Duration,
    pub(super) retry_max: Duration,
    pub(super) timeout: Duration,
    pub(super) in_flight: Arc<Semaphore>,
    /// Where an event's copy tells its attempts and its end.
    pub(super) reports: Arc<dyn crate::domain::event_copy::CopyReports>,
    /// Set when it decides to sleep: from then on its relay no longer
    /// counts it as draining, so an admission starts another.
    pub(super) asleep: Arc<std::sync::atomic::AtomicBool>,
    /// Where the fleet is told of entries it hands back.
    pub(super) waker: dripfeed::global::RedisConnection,
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
    ///
    /// With `adaptive` (`steering`), a future beside it (polled with it,
    /// not a task of its own) keeps the lane's rate at the fleet's, until
    /// stopped too.
    pub(super) async fn run(
        self: Arc<Self>,
        steering: Option<Steering>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let this = self;
        // Its own stop: told when the drain stops or sleeps, so it gives
        // its lease back either way.
        let (steering_stop, steering_stopped) = tokio::sync::watch::channel(false);
        let steering = match (steering, &this.lane.steer) {
            (Some(s), Some(steer)) => Some(steer::run(
                steer.clone(),
                s,
                this.lane.counts.clone(),
                this.lane.budget,
                steering_stopped,
            )),
            _ => None,
        };
        // The entries this drain holds (claimed ahead, being delivered, or
        // ended and not yet acknowledged), by stream id: one held so long
        // that its own take-over scan hands it back is not sent twice.
        let held: Held = Arc::default();
        let acks = Arc::new(Acks::default());
        let cap = u32::try_from(this.in_flight.available_permits()).unwrap_or(u32::MAX);
        // One future, not a task each: the emitter, its acknowledgements
        // and its steering, polled together. The emitter never panics;
        // should it, its deliveries under way still end and what they
        // ended is still acknowledged (a steering that panics stops alone).
        let emit = async {
            let emitted = AssertUnwindSafe(this.emit(stop, &acks, &held, cap))
                .catch_unwind()
                .await;
            if emitted.is_err() {
                tracing::error!(destination = %this.downstream.name, "shared queue: a drain panicked; its deliveries under way end and are acknowledged");
            }
            // Every place back: the deliveries under way have ended.
            let _ = this.in_flight.acquire_many(cap).await;
            acks.close();
            let _ = steering_stop.send(true);
        };
        let steering = futures_util::future::OptionFuture::from(
            steering.map(|s| AssertUnwindSafe(s).catch_unwind()),
        );
        tokio::join!(emit, acknowledge(&this.lane.queue, &acks, &held), steering);
    }

    /// The emitter: until stopped, a place (of `cap`), the pacing, a
    /// permit, then one entry, delivered in a task of its own; then what
    /// it claimed ahead handed back.
    async fn emit(
        self: &Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
        acks: &Arc<Acks>,
        held: &Held,
        cap: u32,
    ) {
        let this = self;
        let steer = this.lane.steer.clone();
        let idle = take_over_idle(this.timeout);
        let mut upkeep = Instant::now();
        let mut next = Instant::now();
        // Where the take-over scan of the pending list goes on from.
        let mut cursor = "0-0".to_owned();
        let mut failing = Failing::default();
        // A claim failed that Redis may have run all the same.
        let mut unanswered = false;
        let mut quiet = true;
        // Since when nothing came, and the fleet's depth as last read.
        let (mut quiet_since, mut depth_read): (Option<Instant>, Option<u64>) = (None, None);
        // Claimed ahead, each still waiting for its place, slot and permit.
        let mut buffer = std::collections::VecDeque::new();
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
            // Paced: one emission per interval, never a burst for time lost;
            // up to a timer tick early (the timer's resolution is 1 ms: a
            // drain sleeping for each 1 µs slot would emit 1,000/s).
            if next > Instant::now() + PACE_SLACK {
                tokio::select! {
                    _ = tokio::time::sleep_until(next - PACE_SLACK) => {}
                    _ = stop.changed() => break,
                }
            }
            // The fleet's rate may move (adaptive): the pace follows it, and
            // a receiver's Retry-After pauses every relay.
            let rate = this.lane.rate_now().max(0.001);
            next = next.max(Instant::now()) + Duration::from_secs_f64(1.0 / rate);
            // Looked at again every 100 ms: a pause the fleet ends early
            // ends here too.
            while let Some(wait) = steer.as_ref().and_then(|s| s.paused()) {
                tokio::select! {
                    _ = tokio::time::sleep(wait.min(Duration::from_millis(100))) => {}
                    _ = stop.changed() => break 'run,
                }
            }
            // The fleet's breaker for the destination: open, nothing is
            // sent nor claimed (what was claimed ahead goes back to the
            // fleet); past its cool-down one relay probes.
            let mut probing = Probing(None);
            loop {
                match this.breaker.pass() {
                    Pass::Send => break,
                    Pass::Probe => {
                        probing = Probing(Some(this.breaker.clone()));
                        break;
                    }
                    Pass::Wait(wait) => {
                        if !buffer.is_empty() {
                            let left: Vec<Claimed> = buffer.drain(..).map(|(_, e)| e).collect();
                            let _ = this.lane.queue.release(&left).await;
                            let mut ours = lock(held);
                            for e in &left {
                                ours.remove(&e.stream_id);
                            }
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(wait.clamp(BREAKER_MIN_WAIT, BREAKER_MAX_WAIT)) => {}
                            _ = stop.changed() => break 'run,
                        }
                        this.breaker.look().await;
                    }
                }
            }
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
                if let Err(e) = q.promote_due(256, this.retry_max).await {
                    tracing::debug!(error = %e, "shared queue: retries not moved");
                }
                depth_read = q.depth().await.ok();
                if let Some(depth) = depth_read {
                    this.lane.counts.fleet_depth(depth);
                }
                match q.reclaim_from(&cursor, idle, 1).await {
                    Ok((next, mut taken)) => {
                        cursor = next;
                        if let Some(e) = taken.pop() {
                            upkeep = Instant::now(); // more may be waiting
                            if lock(held).insert(e.stream_id.clone()) {
                                tracing::info!(id = %e.id, "shared queue: took over a webhook a relay left pending");
                                if this.abandoned(&e).await {
                                    // Its holders kept dying with it: a
                                    // dead letter, not one more relay lost.
                                    this.dead_letter(
                                        Ending::dead_lettered(e.stream_id, None, "abandoned"),
                                        acks,
                                    );
                                    continue;
                                }
                                entry = Some((Instant::now(), e));
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "shared queue: nothing reclaimed"),
                }
            }
            if entry.is_none() {
                entry = buffer.pop_front();
            }
            if entry.is_none() {
                // As many as this drain will emit in the next 50 ms and has
                // places for: fewer round trips per webhook at high rates,
                // and never more held than a moment's work.
                let want = ((rate * CLAIM_AHEAD.as_secs_f64()).ceil() as usize)
                    .min(this.in_flight.available_permits() + 1)
                    .clamp(1, MAX_CLAIM);
                match q.claim(want).await {
                    Ok(got) => {
                        failing.ended();
                        let now = Instant::now();
                        lock(held).extend(got.iter().map(|e| e.stream_id.clone()));
                        buffer.extend(got.into_iter().map(|e| (now, e)));
                        if unanswered {
                            // Claims Redis ran after this relay stopped
                            // waiting: pending here, held nowhere (what
                            // this claim took is held already).
                            unanswered = !this.take_up_own(held, &mut buffer).await;
                        }
                        // Waking with work, the breaker not heard of for a
                        // second: asked before anything is sent (another
                        // relay may have opened it meanwhile).
                        if quiet
                            && probing.0.is_none()
                            && !buffer.is_empty()
                            && this.breaker.unheard(Duration::from_secs(1))
                        {
                            this.breaker.look().await;
                            if !this.breaker.closed() {
                                continue;
                            }
                        }
                        entry = buffer.pop_front();
                    }
                    Err(e) => {
                        // Not given back: a permit is not carried through
                        // a Redis failure (the bucket drains meanwhile).
                        if let Some(p) = permit {
                            p.spend();
                        }
                        failing.failed(&e);
                        unanswered |= e.may_have_run();
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                }
            }
            let Some((claimed_at, entry)) = entry else {
                // Unspent: back to the pool, and to Redis once the drain
                // has stayed quiet for the lease's lifetime.
                drop(permit);
                drop(place);
                quiet = true;
                if let Some(s) = &steer {
                    s.idle();
                }
                // Quiet long enough, nothing held here, nothing queued in
                // the fleet: this drain ends until an admission wakes it.
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SLEEP_AFTER
                    && buffer.is_empty()
                    && depth_read == Some(0)
                    && this.in_flight.available_permits() == cap as usize
                {
                    // Asleep first, then the queue looked at once more: an
                    // admission before the look is seen here, one after it
                    // finds this drain asleep and starts another.
                    this.asleep.store(true, std::sync::atomic::Ordering::SeqCst);
                    if q.depth().await.is_ok_and(|d| d == 0) {
                        break;
                    }
                    this.asleep
                        .store(false, std::sync::atomic::Ordering::SeqCst);
                    quiet_since = None;
                }
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = stop.changed() => break,
                }
                continue;
            };
            quiet = false;
            quiet_since = None;
            let permit = match permit {
                Some(p) => p,
                // Waking up: the entry is held while the permit comes (a
                // lease away, far within the take-over time).
                None => match this.permit(&mut stop).await {
                    Some(p) => p,
                    None => {
                        // Stopping: handed back with what was claimed
                        // ahead, below.
                        buffer.push_front((claimed_at, entry));
                        break 'run;
                    }
                },
            };
            // Held a while (a permit slow to come): its idle time starts
            // again before it is sent, or, taken over meanwhile, it is not
            // this relay's to send.
            if claimed_at.elapsed() > HOLD_REFRESH {
                match q.hold(&entry).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::info!(id = %entry.id, "shared queue: a webhook held too long was taken over; not sent here");
                        lock(held).remove(&entry.stream_id);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, id = %entry.id, "shared queue: a webhook held too long is left to be taken over");
                        lock(held).remove(&entry.stream_id);
                        continue;
                    }
                }
            }
            permit.spend();
            if let Some(s) = &steer {
                s.worked();
            }
            let counts = &this.lane.counts;
            counts.depth(buffer.len() as u64);
            if let Some(waited) = waited(&entry.stream_id, std::time::SystemTime::now()) {
                counts.waited(waited);
            }
            counts.started();
            let probe = probing.sent();
            let (this, acks, held) = (this.clone(), acks.clone(), held.clone());
            tokio::spawn(async move {
                let stream_id = entry.stream_id.clone();
                // Held until its end is acknowledged (the acknowledger lets
                // it go), or now if it was not ended here.
                if !this.deliver(entry, &acks, probe).await {
                    lock(&held).remove(&stream_id);
                }
                this.lane.counts.ended();
                drop(place);
            });
        }
        // What it claimed is no longer this relay's to send.
        this.lane.counts.depth(0);
        if !buffer.is_empty() {
            // Claimed ahead and not delivered: handed back, so the fleet
            // takes them at once (else after the take-over time).
            let left: Vec<Claimed> = buffer.into_iter().map(|(_, e)| e).collect();
            match this.lane.queue.release(&left).await {
                Ok(n) => {
                    tracing::info!(
                        entries = n,
                        "shared queue: webhooks claimed ahead are handed back to the fleet"
                    );
                    // Whichever relays sleep for it wake and take them.
                    super::redis::wake_stream::tell(&this.waker, &this.downstream.name);
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    entries = left.len(),
                    "shared queue: webhooks claimed ahead are left for the fleet to take over"
                ),
            }
        }
    }

    /// Takes up this consumer's pending entries that `held` does not hold
    /// (claims Redis ran after this relay stopped waiting for them, which
    /// would otherwise wait for a take-over scan: 15 s and more), into
    /// `buffer`. Whether the whole list was read.
    async fn take_up_own(
        &self,
        held: &Held,
        buffer: &mut std::collections::VecDeque<(Instant, Claimed)>,
    ) -> bool {
        let mut after = "0".to_owned();
        for _ in 0..OWN_PAGES {
            let page = match self.lane.queue.own_pending(&after, MAX_CLAIM).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::debug!(error = %e, "shared queue: own pending entries not read");
                    return false;
                }
            };
            let whole = page.len() < MAX_CLAIM;
            let now = Instant::now();
            let mut ours = lock(held);
            for e in page {
                after.clone_from(&e.stream_id);
                if ours.insert(e.stream_id.clone()) {
                    tracing::info!(id = %e.id, "shared queue: took up a webhook claimed while Redis did not answer");
                    buffer.push_back((now, e));
                }
            }
            if whole {
                return true;
            }
        }
        true
    }

    /// Whether `entry`, just taken over, has been taken over too often
    /// ([`TAKEN_OVER_MAX`] times): every relay that held it died (or hung)
    /// with it. Unknown (Redis failing) is not.
    async fn abandoned(&self, entry: &Claimed) -> bool {
        match self.lane.queue.deliveries(entry).await {
            Ok(n) => n > TAKEN_OVER_MAX,
            Err(_) => false,
        }
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
    /// Whether its end went to the acknowledgements (`false`: retried, or
    /// left pending to be taken over).
    async fn deliver(&self, entry: Claimed, acks: &Acks, probe: bool) -> bool {
        let job = match Job::decode(&entry.job) {
            Ok(job) => job,
            Err(e) => {
                // Another version's encoding, or damage: kept as it is, in
                // the dead-letter file, not dropped.
                tracing::error!(id = %entry.id, error = %e, "shared queue: an entry does not decode; dead-lettered as it is");
                if probe {
                    // Nothing was sent: not the fleet's probe.
                    self.breaker.unprobe();
                }
                let ending = Ending::unsent(entry.stream_id, "undecodable");
                return self.dead_letter(ending, acks);
            }
        };
        let mut job = job;
        let public = number_of(&entry.id);
        job.trail.name(public);
        if let Some(of) = job.event_of.take() {
            // An event's copy: its attempts and end go to the fleet's events.
            job.event = Some(Arc::new(crate::domain::event_copy::EventCopy {
                seq: public,
                endpoint: self.downstream.name.clone(),
                app: of.app.clone(),
                kind: of.kind.clone(),
                tenant: job.tenant.clone(),
                created_ms: job.received_unix_ms,
                store: self.reports.clone(),
                held: None,
            }));
        }
        let attempt = Attempt::new(public, entry.attempts.saturating_add(1));
        let began = Instant::now();
        let answer =
            tokio::time::timeout(self.timeout, self.downstream.deliver(&job, attempt)).await;
        // An event copy's attempt cut off here is recorded as its
        // delivery's future is dropped (`deliver`'s own record).
        let timed_out = answer.is_err();
        let answer = answer.unwrap_or(Delivery::Retry { after: None });
        let took = began.elapsed();
        if let Some(s) = &self.lane.steer {
            s.attempted(&answer, took, timed_out);
        }
        self.breaker.ended(&answer, timed_out, probe);
        let counts = &self.lane.counts;
        counts.attempted(took, !matches!(answer, Delivery::Done));
        let made = entry.attempts.saturating_add(1);
        // The receiver's answer, for the webhook's status (0: none).
        let last = u16::try_from(job.trail.last_status())
            .ok()
            .filter(|s| *s != 0);
        // Its error (none if it was delivered), kept with its status.
        let error = job.trail.last_error();
        let error = error.as_deref().unwrap_or("");
        match answer {
            Delivery::Done => {
                counts.delivered();
                acks.send(Ending::delivered(entry.stream_id, last))
            }
            Delivery::Retry { after } if made <= self.retries => {
                let (min, max) = (self.retry_min, self.retry_max);
                let jittered = retry_wait(after, made, (min, max), fastrand::f64());
                counts.retried();
                if let Err(e) = self
                    .lane
                    .queue
                    .retry_failed(&entry, jittered, last, error)
                    .await
                {
                    // Left pending: taken over and tried again later.
                    tracing::warn!(error = %e, "shared queue: a retry could not be scheduled");
                }
                false
            }
            Delivery::Retry { .. } => {
                // Its retries spent: `failed`, the local engine's reason.
                if let Some(copy) = &job.event {
                    copy.dead_lettered("failed");
                }
                let ending = Ending::dead_lettered(entry.stream_id, last, "failed");
                self.dead_letter(ending.with_error(error), acks)
            }
            Delivery::Failed => {
                if let Some(copy) = &job.event {
                    copy.dead_lettered("failed");
                }
                let ending = Ending::dead_lettered(entry.stream_id, last, "failed");
                self.dead_letter(ending.with_error(error), acks)
            }
        }
    }

    /// Dead-letters the entry: ended with its reason, the script that
    /// acknowledges it writing it to the destination's dead letters in
    /// Redis in the same step (nothing is lost between the two).
    fn dead_letter(&self, ending: Ending, acks: &Acks) -> bool {
        self.lane.counts.dead_lettered(1);
        acks.send(ending)
    }
}

/// The fleet's probe this drain took, handed back unless it is sent (an
/// entry taken over, dead-lettered or not found meanwhile).
struct Probing(Option<Arc<FleetBreaker>>);

impl Probing {
    /// Whether this is the probe; it is sent now, not handed back.
    fn sent(&mut self) -> bool {
        self.0.take().is_some()
    }
}

impl Drop for Probing {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            b.unprobe();
        }
    }
}

/// How long the entry `stream_id` (`<ms>-<seq>`, the time Redis added it)
/// has waited at `now`; `None` for an id of another shape. A clock behind
/// Redis's reads zero.
fn waited(stream_id: &str, now: std::time::SystemTime) -> Option<Duration> {
    let ms: u64 = stream_id.split_once('-')?.0.parse().ok()?;
    let added = std::time::UNIX_EPOCH + Duration::from_millis(ms);
    Some(now.duration_since(added).unwrap_or_default())
}

/// A run of failed claims, logged at its start, then at most every 30 s
/// with how many, and at its end (not a line every half second while
/// Redis is down).
#[derive(Default)]
struct Failing {
    /// When the last line was written, and failures since the run began.
    run: Option<(Instant, u64)>,
}

impl Failing {
    fn failed(&mut self, e: &dripfeed::global::RedisError) {
        match &mut self.run {
            None => {
                tracing::warn!(error = %e, "shared queue: cannot claim webhooks; retrying every 500 ms");
                self.run = Some((Instant::now(), 1));
            }
            Some((logged, n)) => {
                *n += 1;
                if logged.elapsed() >= Duration::from_secs(30) {
                    tracing::warn!(error = %e, failures = *n, "shared queue: still cannot claim webhooks");
                    *logged = Instant::now();
                }
            }
        }
    }

    fn ended(&mut self) {
        if let Some((_, n)) = self.run.take() {
            tracing::info!(failures = n, "shared queue: claims work again");
        }
    }
}

/// The entries a drain holds, by stream id.
type Held = Arc<std::sync::Mutex<HashSet<String>>>;

/// What a drain's deliveries ended, waiting to be acknowledged: as large
/// as what is waiting, nothing once it is sent (a channel would keep a
/// block of slots for every drain, a batch buffer 20 KiB).
#[derive(Default)]
struct Acks {
    ended: std::sync::Mutex<Vec<Ending>>,
    more: Notify,
    closed: AtomicBool,
}

impl Acks {
    /// Hands `ending` to the acknowledgements: `true`, its end is theirs
    /// (they are closed only once every delivery has ended).
    fn send(&self, ending: Ending) -> bool {
        lock(&self.ended).push(ending);
        self.more.notify_one();
        true
    }

    /// Nothing more comes: [`acknowledge`] ends once it has sent the rest.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.more.notify_one();
    }

    /// Up to `most` of what is waiting, the oldest first; `None` once
    /// closed and empty. Waits while there is nothing.
    async fn take(&self, most: usize) -> Option<Vec<Ending>> {
        loop {
            {
                let mut ended = lock(&self.ended);
                if !ended.is_empty() {
                    return Some(match ended.len() <= most {
                        true => std::mem::take(&mut *ended),
                        false => ended.drain(..most).collect(),
                    });
                }
                if self.closed.load(Ordering::Acquire) {
                    return None;
                }
            }
            // A notice given since the look is kept (`notify_one`).
            self.more.notified().await;
        }
    }

    /// Up to `most` more of what is waiting now, onto `batch`.
    fn top_up(&self, batch: &mut Vec<Ending>, most: usize) {
        let mut ended = lock(&self.ended);
        let n = ended.len().min(most.saturating_sub(batch.len()));
        batch.extend(ended.drain(..n));
    }
}

/// Acknowledges what the drain ended, in batches (one round trip for all
/// that ended meanwhile), retrying a batch for about two minutes: an
/// acknowledgement given up (or later than the take-over time) has the
/// webhook delivered again, with the same idempotency key.
async fn acknowledge(queue: &RedisQueue, acks: &Acks, held: &Held) {
    while let Some(mut batch) = acks.take(ACK_BATCH).await {
        if batch.len() < ACK_BATCH {
            // A moment for more to end: fewer round trips per webhook.
            tokio::time::sleep(ACK_LINGER).await;
            acks.top_up(&mut batch, ACK_BATCH);
        }
        let mut wait = Duration::from_millis(50);
        for _ in 0..40 {
            match queue.end(&batch).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, entries = batch.len(), "shared queue: acknowledgements not taken; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
        // Ended (or given up: taken over later, by any relay this one too).
        let mut ours = lock(held);
        for e in &batch {
            ours.remove(&e.stream_id);
        }
    }
}

/// The wait before a failed attempt's retry (attempt `made` failed): the
/// receiver's `Retry-After` as it asked (never sooner), else the backoff
/// from `retry_min` doubling per attempt, jittered down by up to half by
/// `u` in [0, 1); either at most `retry_max`.
fn retry_wait(
    after: Option<Duration>,
    made: u32,
    (min, max): (Duration, Duration),
    u: f64,
) -> Duration {
    match after {
        Some(after) => after.min(max),
        None => {
            let backoff = min.saturating_mul(1 << made.min(16).saturating_sub(1));
            backoff.min(max).mul_f64(0.5 + u.clamp(0.0, 1.0) / 2.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::retry_wait;

    #[test]
    fn a_retry_after_is_kept_as_asked_and_a_backoff_jittered() {
        use std::time::Duration;
        let s = Duration::from_secs;
        let bounds = (Duration::from_millis(100), s(600));
        for u in [0.0, 0.5, 0.999] {
            // The receiver's 30 s: never sooner (it was 15 to 30 s).
            assert_eq!(retry_wait(Some(s(30)), 1, bounds, u), s(30));
            assert_eq!(
                retry_wait(Some(s(3600)), 1, bounds, u),
                s(600),
                "at most retry_max"
            );
        }
        // Attempt 3 failed: 400 ms, jittered down by up to half.
        let w = retry_wait(None, 3, bounds, 0.0);
        assert_eq!(w, Duration::from_millis(200));
        assert_eq!(retry_wait(None, 3, bounds, 1.0), Duration::from_millis(400));
        assert_eq!(retry_wait(None, 40, bounds, 1.0), s(600));
    }

    use super::*;

    #[test]
    fn a_stream_entry_waited_since_redis_added_it() {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_001_500);
        assert_eq!(
            waited("1700000000000-3", at),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(
            waited("1700000009000-0", at),
            Some(Duration::ZERO),
            "a clock behind Redis's"
        );
        assert_eq!(waited("not-an-id", at), None);
        assert_eq!(waited("17", at), None);
    }
}
