//! `queue = redis`: every relay of a fleet takes webhooks into one queue
//! per destination in Redis Streams ([`super::redis::queue::RedisQueue`]) and
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
//!   most that), and only then claims entries: as many as it will emit in
//!   the next 50 ms (at least one, at most its free places), so an entry is
//!   in a relay's hands only a moment before it is delivered, and at high
//!   rates one claim serves many webhooks. An idle drain claims first and
//!   takes a permit once something comes. Acknowledgements go in batches,
//!   retried until Redis takes them. A retry waits in Redis by its
//!   due time and comes back through whichever relay moves it first; a
//!   webhook past its retries or refused for good goes to the
//!   destination's dead letters in Redis, written by the script that
//!   acknowledges it (read and redriven from any relay: see
//!   `shared_letters`).
//! - **A dead node**: its pending entries are reclaimed (`XAUTOCLAIM`) once
//!   idle for the deliver timeout plus 1 s (a drain's bound on one
//!   attempt) plus 50 ms (what a drain claims ahead) plus five seconds:
//!   never sooner, which is
//!   how duplicates happen; a holder that was too slow cannot retry an
//!   entry taken over from it.
//!
//! A webhook's id is a random 64-bit number given at admission and kept in
//! its entry (stream ids are per destination, so not unique in the fleet).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use dripfeed::PermitSource;
use dripfeed::destinations::Drivers;
use dripfeed::global::{Failure, RedisAimd, RedisConnection, RedisRate};
use dripfeed::keyed::BucketStore;
use dripfeed::rate::AimdConfig;
use tokio::sync::{Semaphore, watch};

use super::redis::keys::RedisKeys;
use super::redis::queue::{Purposes, RedisQueue};
use super::redis::queue_status::JobStatus;

use super::breaker::FleetBreaker;
use super::counts::{Counts, Series};
use super::drain::Drain;
use super::driven::Driven;
use super::lane::Lane;
use super::redis::CALL;
use super::redis::breaker::{RedisBreaker, Rule};
use super::steer::{Steer, Steering};
use crate::config::{Config, Destination};
use crate::deliver::deliveries::Deliveries;
use crate::domain::limits::held;
use crate::util::mutex::lock;

/// Dead letters each destination keeps in Redis, about (the oldest go).
pub(crate) const DEAD_LETTERS_KEPT: u64 = 100_000;

/// Connections of their own for admissions that wait for replicas.
const ADMITTERS: usize = 8;

/// What admission answered.
pub(crate) enum Admit {
    /// Queued: the webhook's id.
    Queued(u64),
    /// The idempotency key was seen for the same request: the first
    /// webhook's id.
    Repeat(u64),
    /// The idempotency key was used for another request (another
    /// destination or body): nothing queued.
    KeyReused,
    /// The fleet's queue for it is full: retry after this.
    Full(Duration),
    /// Queued, but fewer replicas than asked confirmed it: how many did,
    /// and its id.
    Unconfirmed(u64, u64),
    /// The tenant is over its quota, as its bucket said (`None`: a quota
    /// smaller than one webhook); nothing queued.
    OverQuota(Option<dripfeed::keyed::OverQuota>),
    /// The tenant quota store cannot be reached (nothing queued).
    QuotaUnavailable,
    /// Queued into a full queue (head-drop): its id; the oldest unclaimed
    /// webhook went to the dead letters.
    Evicted(u64),
    /// The queue was full (dead-letter): the webhook went to the dead
    /// letters; its id.
    Deferred(u64),
    /// Redis did not answer the queueing in time (it may be stalled): it
    /// may have run it, queueing the webhook under this id.
    Unanswered(u64),
}

/// Lanes asked at once for a webhook's status.
const STATUS_LOOKUPS: usize = 16;

/// The fleet's queues, one per destination this relay knows (configured,
/// made through the admin API of any relay, or deleted and still listed
/// for its dead letters).
pub(crate) struct Shared {
    lanes: RwLock<HashMap<String, Arc<Lane>>>,
    /// The fleet's idempotency keys.
    pub(super) keys: RedisKeys,
    /// This relay's metrics, by destination (kept across a lane's changes).
    counts: Mutex<HashMap<String, Arc<Counts>>>,
    /// The series of destinations without their own (`_other`).
    other: Arc<Series>,
    /// With `adaptive`: each destination's fleet rate as this relay knows
    /// it (kept across a lane's changes).
    steers: Mutex<HashMap<String, Arc<Steer>>>,
    /// Each destination's breaker as this relay sees the fleet's, made at
    /// its first drain here (kept across a lane's changes).
    breakers: Mutex<HashMap<String, Arc<FleetBreaker>>>,
    pub(super) remember: Duration,
    conn: RedisConnection,
    /// The connection handles every lane's queue shares.
    links: Arc<Purposes>,
    /// The tenant quotas, shared by the fleet (in Redis or PostgreSQL).
    pub(super) quotas: Option<Arc<dyn BucketStore>>,
    /// What every lane and drain is made with.
    made: Made,
    /// What deliveries need, once [`spawn`](Self::spawn) has run.
    deliveries: OnceLock<Drains>,
    /// The drains running, by destination.
    drains: Mutex<HashMap<String, Running>>,
    /// The few tasks every drain runs on (one scheduler for many drains,
    /// as in the local engine), once [`spawn`](Self::spawn) has run.
    drivers: OnceLock<Arc<Drivers>>,
    /// Drains told to stop (a new rate, a deletion) ending their deliveries.
    retiring: Mutex<Vec<Driven>>,
    /// Set by [`finish`](Self::finish): no drain starts after it.
    finishing: AtomicBool,
    /// The fleet's limit over every destination (`global_rate`), if any.
    global: Option<Arc<dyn PermitSource>>,
    /// The fleet's events (applications' events, their copies' attempts).
    pub(crate) events: super::redis::events::RedisEvents,
    /// Which admission connection [`waiting`](Self::waiting) gives next.
    next_admitter: std::sync::atomic::AtomicUsize,
    /// Whether the fleet's map (what its admin API made) has been read
    /// and applied here: until then this relay does not know every
    /// destination, and is not ready.
    pub(crate) map_read: AtomicBool,
    /// When this relay last told the fleet of an admission, by
    /// destination ([`super::wake`]).
    pub(super) told: Mutex<HashMap<String, std::time::Instant>>,
}

/// Queues whose depths one round trip reads (a scan of the sleeping
/// destinations, a scrape).
const DEPTHS_AT_ONCE: usize = 256;

/// One running drain.
struct Running {
    stop: watch::Sender<bool>,
    /// Set once it has decided to sleep.
    asleep: Arc<AtomicBool>,
    task: Driven,
    /// The rate, adaptive ceiling and budget it runs with, and whether its
    /// series are its own: a change of any starts it again.
    shape: (f64, Option<f64>, Duration, bool),
}

impl Running {
    /// Whether it runs and has not decided to sleep.
    fn awake(&self) -> bool {
        !self.task.is_finished() && !self.asleep.load(Ordering::SeqCst)
    }
}

/// The settings lanes and drains are made with.
struct Made {
    node: Arc<str>,
    admitters: Vec<RedisConnection>,
    wait_replicas: u32,
    status_retention: Duration,
    status_max: u64,
    rate: f64,
    budget: Duration,
    retries: u32,
    retry_min: Duration,
    retry_max: Duration,
    timeout: Duration,
    /// Deliveries at once per destination.
    cap: usize,
    /// What a full queue does.
    overflow: dripfeed::Overflow,
    /// With `adaptive`: the controller's settings (a destination's
    /// `ceiling` overrides its ceiling).
    aimd: Option<AimdConfig>,
    /// The breaker's rule.
    breaker: Rule,
}

/// What the drains need from the relay.
pub(crate) struct Drains {
    /// Deliveries, one downstream per destination.
    pub downstream: Arc<Deliveries>,
}

impl Shared {
    /// The queues of `cfg`'s destinations, read as `node`, charging
    /// tenants to `quotas` when they have quotas.
    pub(crate) async fn open(
        cfg: &Config,
        node: &str,
        quotas: Option<Arc<dyn BucketStore>>,
    ) -> Result<Shared, String> {
        let s = &cfg.settings;
        let url = s.redis.as_ref().ok_or("queue = redis needs redis")?;
        let conn = super::link::connect(url.as_str()).await?;
        // With replicas to wait for, admissions have connections of their
        // own (WAIT holds up the one it is sent on).
        let mut admitters = Vec::new();
        if s.redis_wait_replicas > 0 {
            for _ in 0..ADMITTERS {
                admitters.push(super::link::connect(url.as_str()).await?);
            }
        }
        let global = match s.global_rate {
            Some(rate) => Some(super::global::bucket(conn.clone(), rate)?),
            None => None,
        };
        let events = super::redis::events::RedisEvents::new(
            conn.clone(),
            u64::try_from(s.event_retention.as_millis()).unwrap_or(u64::MAX),
            // About a KiB an event: the byte bound as a count.
            (s.event_retention_bytes / 1024).max(1_000),
        );
        let shared = Shared {
            events,
            next_admitter: std::sync::atomic::AtomicUsize::new(0),
            told: Mutex::default(),
            map_read: AtomicBool::new(true),
            global,
            lanes: RwLock::default(),
            keys: RedisKeys::new(conn.clone(), super::super::NAME),
            counts: Mutex::default(),
            other: Arc::new(Series::new(
                dripfeed::destinations::OTHER,
                false,
                s.overflow.policy(),
            )),
            steers: Mutex::default(),
            breakers: Mutex::default(),
            remember: s.idempotency_window,
            links: Arc::new(Purposes::new(&conn).with_admitters(&admitters)),
            conn,
            quotas,
            made: Made {
                node: node.into(),
                admitters,
                wait_replicas: s.redis_wait_replicas,
                status_retention: s.status_retention,
                status_max: s.status_max as u64,
                rate: s.drain_rate,
                budget: s.latency_budget,
                retries: s.retries,
                retry_min: s.retry_min,
                retry_max: s.retry_max,
                timeout: s.deliver_timeout + Duration::from_secs(1),
                cap: s.lane_cap(cfg.destinations.len()),
                overflow: s.overflow.policy(),
                breaker: breaker_rule(s.breaker_max_cool_down, s.deliver_timeout),
                aimd: s.adaptive.then(|| {
                    AimdConfig::default()
                        .with_floor(s.floor)
                        .with_ceiling(s.ceiling)
                        .with_target_p99(s.target_p99)
                }),
            },
            deliveries: OnceLock::new(),
            drivers: OnceLock::new(),
            drains: Mutex::default(),
            retiring: Mutex::default(),
            finishing: AtomicBool::new(false),
        };
        for d in &cfg.destinations {
            shared.define(d);
        }
        Ok(shared)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Lane>>> {
        self.lanes.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Lane>>> {
        self.lanes.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The tenant quotas, if tenants have quotas.
    pub(crate) fn quotas(&self) -> Option<&Arc<dyn BucketStore>> {
        self.quotas.as_ref()
    }

    /// One of the connections admissions that wait for replicas go
    /// through, in turn (none without `redis_wait_replicas`), and how many
    /// replicas.
    pub(crate) fn waiting(&self) -> (Option<&RedisConnection>, u32) {
        let all = &self.made.admitters;
        let next = self.next_admitter.fetch_add(1, Ordering::Relaxed);
        let conn = (!all.is_empty()).then(|| &all[next % all.len()]);
        (conn, self.made.wait_replicas)
    }

    /// `name`'s lane, open or deleted.
    pub(crate) fn lane(&self, name: &str) -> Option<Arc<Lane>> {
        self.read().get(name).cloned()
    }

    /// Every lane, by name.
    pub(crate) fn all(&self) -> Vec<(String, Arc<Lane>)> {
        let mut all: Vec<_> = self
            .read()
            .iter()
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// A lane for `name` at `rate` and `budget`.
    /// `own`: whether it has series of its own (`None`: as it had, else
    /// not).
    fn made_lane(
        &self,
        name: &str,
        rate: f64,
        budget: Duration,
        open: bool,
        own: Option<bool>,
    ) -> Lane {
        let m = &self.made;
        let bound = held(budget, rate) as u64;
        let counts = self.counts_of(name, own);
        if open {
            counts.shape(bound, rate);
        }
        let steer = m.aimd.as_ref().filter(|_| open).map(|_| {
            let steer = lock(&self.steers)
                .entry(name.to_owned())
                .or_insert_with(|| Arc::new(Steer::new(rate)))
                .clone();
            steer.start_from(rate);
            steer
        });
        Lane {
            steer,
            ceiling: None,
            counts,
            queue: RedisQueue::sharing(self.links.clone(), name, m.node.clone())
                .with_replicas(m.wait_replicas, Duration::from_millis(100))
                .with_status(m.status_retention, m.status_max)
                .with_dead_letters(DEAD_LETTERS_KEPT)
                .with_overflow(m.overflow),
            rate,
            budget,
            open,
        }
    }

    /// `name`'s counts, adding to its own series when `own` (`None`: as
    /// they did, else `_other`'s).
    fn counts_of(&self, name: &str, own: Option<bool>) -> Arc<Counts> {
        let mut all = lock(&self.counts);
        let found = all.get(name);
        if let Some(c) = found.filter(|c| own.is_none_or(|o| o == c.own())) {
            return c.clone();
        }
        let own = own.unwrap_or(false);
        let series = match own {
            true => Arc::new(Series::new(name, true, self.made.overflow)),
            false => self.other.clone(),
        };
        let counts = Arc::new(match found {
            Some(c) => c.moved_to(series, own),
            None => Counts::new(series, own),
        });
        all.insert(name.to_owned(), counts.clone());
        counts
    }

    /// `name`'s breaker as this relay sees the fleet's, made when its
    /// first drain here starts (an idle destination holds none), its
    /// series as its counts' (made again if that changed: its state is
    /// the fleet's, read again from Redis).
    fn breaker_of(&self, name: &str, own: bool) -> Arc<FleetBreaker> {
        let mut all = lock(&self.breakers);
        if let Some(b) = all.get(name).filter(|b| b.own() == own) {
            return b.clone();
        }
        let m = &self.made;
        let redis = RedisBreaker::new(&self.conn, name, m.node.clone(), m.breaker);
        let b = Arc::new(FleetBreaker::new(redis, name, own));
        all.insert(name.to_owned(), b.clone());
        b
    }

    /// What `name`'s breaker is, as this relay last heard (`closed`
    /// where no drain of it has run here).
    pub(crate) fn breaker_label(&self, name: &str) -> &'static str {
        lock(&self.breakers)
            .get(name)
            .map_or("closed", |b| b.label())
    }

    /// How long an entry must have been pending before it is taken over.
    pub(super) fn take_over_idle(&self) -> Duration {
        super::drain::take_over_idle(self.made.timeout)
    }

    /// Makes or changes (and opens) `d`'s lane, its drain started, or
    /// started again at a new rate (the old one ends what it holds).
    pub(crate) fn define(&self, d: &Destination) {
        let rate = d.rate.unwrap_or(self.made.rate);
        let budget = d.budget.unwrap_or(self.made.budget);
        let mut lane = self.made_lane(&d.name, rate, budget, true, Some(d.own_series()));
        lane.ceiling = d.ceiling;
        if lane.counts.own() {
            // Its breaker's series shown from the start.
            self.breaker_of(&d.name, true);
        }
        let lane = Arc::new(lane);
        self.write().insert(d.name.clone(), lane.clone());
        // A drain running here starts again at the new shape; one that
        // sleeps wakes with the next admission (or the scan).
        if self.draining(&d.name) {
            self.start_drain(&d.name, &lane);
        }
    }

    /// Knows `name` (deleted through the admin API) for its dead letters,
    /// closed, if it is not known yet.
    pub(crate) fn remember_deleted(&self, name: &str) {
        let lane = self.made_lane(name, self.made.rate, self.made.budget, false, None);
        self.write()
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(lane));
    }

    /// Closes `name`'s lane: no admissions, no redrives; its drain keeps
    /// delivering until [`stop_drain`](Self::stop_drain).
    pub(crate) fn close(&self, name: &str) {
        let mut lanes = self.write();
        if let Some(lane) = lanes.get_mut(name) {
            let mut closed = Lane::clone(lane);
            closed.open = false;
            *lane = Arc::new(closed);
        }
    }

    /// Forgets what `name`'s deliveries left here (its last error, its
    /// recent latencies), once its deletion has stopped its drain: every
    /// relay does, as the one that deletes it does (one made again under
    /// the name showed the deleted one's on the others).
    pub(crate) fn forget_deliveries(&self, name: &str) {
        if let Some(d) = self.deliveries.get() {
            d.downstream.forget(name);
        }
    }

    /// Stops `name`'s drain and waits until it has ended what it holds.
    pub(crate) async fn stop_drain(&self, name: &str) {
        lock(&self.steers).remove(name);
        lock(&self.breakers).remove(name);
        let running = lock(&self.drains).remove(name);
        if let Some(r) = running {
            let _ = r.stop.send(true);
            r.task.ended().await;
        }
    }

    /// Starts `name`'s drain if none runs at `lane`'s rate, ceiling and
    /// budget (once the relay's deliveries are given, and until it
    /// finishes).
    pub(super) fn start_drain(&self, name: &str, lane: &Lane) {
        let (Some(deliveries), Some(drivers)) = (self.deliveries.get(), self.drivers.get()) else {
            return; // spawn starts them
        };
        let shape = (lane.rate, lane.ceiling, lane.budget, lane.counts.own());
        let mut drains = lock(&self.drains);
        if self.finishing.load(Ordering::Acquire) {
            return;
        }
        if drains
            .get(name)
            .is_some_and(|r| r.shape == shape && r.awake())
        {
            return;
        }
        let asleep = Arc::new(AtomicBool::new(false));
        let permits = match RedisRate::builder(
            self.conn.clone(),
            format!("webhook_relay:queue:{{{name}}}"),
            lane.rate_now(),
        )
        .name("webhook_relay_queue")
        .on_failure(Failure::FailClosed)
        .drivers(drivers)
        .start()
        {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(destination = %name, error = %e, "shared queue: no new drain: the fleet's rate cannot be kept");
                return;
            }
        };
        // Leases sized for this drain's pace (rate × the lease interval).
        permits.set_local_rate(lane.rate_now());
        let m = &self.made;
        let steering = match (&lane.steer, m.aimd.clone()) {
            (Some(steer), Some(aimd)) => {
                // A destination's ceiling below the floor narrows the
                // floor to it, as on one relay.
                let aimd = match lane.ceiling {
                    Some(c) => {
                        let floor = aimd.floor().min(c);
                        aimd.with_floor(floor).with_ceiling(c)
                    }
                    None => aimd,
                };
                steer.within(aimd.floor(), aimd.ceiling());
                match RedisAimd::new(self.conn.clone(), name, &m.node, aimd, lane.rate) {
                    Ok(fleet) => Some(Steering {
                        fleet,
                        permits: permits.clone(),
                    }),
                    Err(e) => {
                        tracing::error!(destination = %name, error = %e, "shared queue: no new drain: the adaptive rate's settings are refused");
                        return;
                    }
                }
            }
            _ => None,
        };
        if let Some(old) = drains.remove(name) {
            let _ = old.stop.send(true);
            let mut retiring = lock(&self.retiring);
            retiring.retain(|t| !t.is_finished());
            retiring.push(old.task);
        }
        let d = Drain {
            breaker: self.breaker_of(name, lane.counts.own()),
            lane: lane.clone(),
            downstream: Arc::new(deliveries.downstream.of(name)),
            permits: match &self.global {
                Some(all) => Arc::new(super::global::Both {
                    one: Arc::new(permits),
                    all: all.clone(),
                }),
                None => Arc::new(permits),
            },
            retries: m.retries,
            retry_min: m.retry_min,
            retry_max: m.retry_max,
            timeout: m.timeout,
            in_flight: Arc::new(Semaphore::new(m.cap)),
            reports: Arc::new(super::reports::Reports(self.events.clone())),
            asleep: asleep.clone(),
            waker: self.conn.counted_as("wake"),
        };
        let (stop, stopped) = watch::channel(false);
        let task = Driven::run(drivers, Arc::new(d).run(steering, stopped));
        drains.insert(
            name.to_owned(),
            Running {
                stop,
                asleep,
                task,
                shape,
            },
        );
    }

    /// Whether a drain for `name` runs on this relay.
    pub(crate) fn draining(&self, name: &str) -> bool {
        lock(&self.drains).get(name).is_some_and(Running::awake)
    }

    /// Whether `name` has a drain here, awake or asleep, that was not
    /// stopped (a deletion stops it for good).
    pub(super) fn has_drain(&self, name: &str) -> bool {
        lock(&self.drains).contains_key(name)
    }

    /// Reads the fleet's depth of each of `lanes` ([`RedisQueue::depths`],
    /// [`DEPTHS_AT_ONCE`] to a round trip) and hands it to `each`, in
    /// order; stops at Redis's first failure (returned), or before the
    /// next round trip once `each` answers false.
    pub(super) async fn each_depth(
        lanes: &[(String, Arc<Lane>)],
        mut each: impl FnMut(&str, &Lane, u64) -> bool,
    ) -> Result<(), dripfeed::global::RedisError> {
        for batch in lanes.chunks(DEPTHS_AT_ONCE) {
            let queues: Vec<&RedisQueue> = batch.iter().map(|(_, lane)| &lane.queue).collect();
            let depths = RedisQueue::depths(&queues).await?;
            let mut go_on = true;
            for ((name, lane), depth) in batch.iter().zip(depths) {
                go_on = each(name, lane, depth);
            }
            if !go_on {
                break;
            }
        }
        Ok(())
    }

    /// Forgets the drains that ended asleep for an open destination: a
    /// sleeping destination holds no drain's handles (a deleted one's are
    /// kept: [`has_drain`](Self::has_drain) answers for its grace), nor,
    /// without series of its own, a closed breaker (made again at its next
    /// drain, its state read from Redis). Costs the drains known here, not
    /// the destinations.
    pub(super) fn forget_sleepers(&self) {
        if !lock(&self.drains).values().any(|r| r.task.is_finished()) {
            return;
        }
        // The lanes, then the drains: the order every path takes them in.
        let lanes = self.read();
        let mut drains = lock(&self.drains);
        let mut forgot = Vec::new();
        drains.retain(|name, r| {
            let lane = lanes.get(name.as_str());
            let asleep = r.task.is_finished() && lane.is_some_and(|l| l.open);
            if asleep && !lane.is_some_and(|l| l.counts.own()) {
                forgot.push(name.clone());
            }
            !asleep
        });
        drop(drains);
        drop(lanes);
        let mut breakers = lock(&self.breakers);
        for name in forgot {
            if breakers.get(&name).is_some_and(|b| b.closed()) {
                breakers.remove(&name);
            }
        }
    }

    /// The connection this relay's queues share.
    pub(super) fn conn(&self) -> &RedisConnection {
        &self.conn
    }

    /// Whether shutdown has begun (no drain starts).
    pub(super) fn finishing(&self) -> bool {
        self.finishing.load(Ordering::Acquire)
    }

    /// `name`'s deliveries running on this relay.
    pub(crate) fn in_flight(&self, name: &str) -> u64 {
        lock(&self.counts)
            .get(name)
            .map_or(0, |c| c.in_flight_now())
    }

    /// The (at most) `k` destinations with the most deliveries running on
    /// this relay, most first.
    pub(crate) fn busiest(&self, k: usize) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = lock(&self.counts)
            .iter()
            .map(|(n, c)| (n.clone(), c.in_flight_now()))
            .filter(|(_, n)| *n > 0)
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// Webhooks this relay delivered since it started.
    pub(crate) fn delivered_here(&self) -> u64 {
        lock(&self.counts)
            .values()
            .map(|c| c.delivered_here())
            .sum()
    }

    /// Whether Redis answers (`/readyz`): one destination's depth read.
    pub(crate) async fn ping(&self) -> Result<(), String> {
        let first = self.read().values().next().cloned();
        match first {
            Some(lane) => lane
                .queue
                .depth()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Webhook `id`'s status and its destination, from whichever
    /// destination's queue knows it (one round trip per destination asked).
    pub(crate) async fn status(&self, id: u64) -> Result<Option<(String, JobStatus)>, String> {
        use futures_util::StreamExt;
        // Only the destinations whose tag the id carries (one in 256), a
        // few at a time.
        let mut asked: Vec<(String, Arc<Lane>)> = self
            .read()
            .iter()
            .filter(|(name, _)| super::webhook_id::may_be(id, name))
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
        asked.sort_by(|a, b| a.0.cmp(&b.0));
        let text = id.to_string();
        let text = &text;
        let mut found = futures_util::stream::iter(asked)
            .map(|(name, lane)| async move {
                let status = lane.queue.status(text).await.map_err(|e| e.to_string());
                status.map(|s| s.map(|s| (name, s)))
            })
            .buffered(STATUS_LOOKUPS);
        while let Some(answer) = found.next().await {
            if let Some(hit) = answer? {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }

    /// Makes drains possible: each destination's starts when it has work
    /// ([`super::wake`]: an admission here, one told by another relay, or
    /// the scan that runs at start), and emits through the fleet's permits
    /// for that destination (a bucket in Redis at its rate: the fleet
    /// together delivers at most the rate, not each relay).
    pub(crate) fn spawn(&self, drains: Drains) {
        let drivers = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
        let _ = self
            .drivers
            .set(Drivers::start(drivers, &tokio::runtime::Handle::current()));
        let _ = self.deliveries.set(drains);
    }

    /// At shutdown: the drains claim nothing more and end the deliveries
    /// they hold (within `grace`), their acknowledgements sent.
    pub(crate) async fn finish(&self, grace: Duration) {
        let running: Vec<Running> = {
            let mut drains = lock(&self.drains);
            self.finishing.store(true, Ordering::Release);
            drains.drain().map(|(_, r)| r).collect()
        };
        let mut tasks = std::mem::take(&mut *lock(&self.retiring));
        for r in running {
            let _ = r.stop.send(true);
            tasks.push(r.task);
        }
        let all = async {
            for task in tasks {
                task.ended().await;
            }
        };
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!(
                "shared queue: deliveries still running at the end of the grace are taken over by the fleet"
            );
        }
    }
}

/// The fleet's breaker rule: the library's (5 failures in a row, or half
/// of the last 20), its cool-down from 1 s (or `max_cool`, if shorter)
/// doubling up to `max_cool`; a probe held as long as a delivery may take
/// (the drain's bound on one) and its end may take to reach Redis (a
/// call's bound), with a second to spare.
fn breaker_rule(max_cool: Duration, deliver_timeout: Duration) -> Rule {
    let lib = dripfeed::destinations::BreakerConfig::default();
    Rule {
        trip_after: lib.trip_after_failures(),
        window: 20,
        share: 0.5,
        cool: max_cool.min(Duration::from_secs(1)),
        max_cool,
        probe_lease: deliver_timeout + Duration::from_secs(1) + CALL + Duration::from_secs(1),
    }
}
