//! [`RedisAimd`]: one adaptive rate for a fleet, decided by one node at a
//! time from what every node measured.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use redis::{Script, Value};
use tokio::time::Instant;

use super::conn::{RedisConnection, RedisError, array, bounded, number};
use super::redis_queue::{CALL, count, text};
use crate::rate::{Aimd, AimdConfig, AimdError, Decision, Tally};

/// Seconds of tallies the deciding node reads: the controller's window.
const WINDOW_SECONDS: u64 = 5;
/// How long the deciding node's lease lasts without a report renewing it.
const LEASE: Duration = Duration::from_secs(3);

/// What [`RedisAimd::report`] learned: the fleet's rate and pause, and
/// whether this node decided them.
///
/// ```
/// let s = dripfeed::global::Steering { rate: 80.0, pause_until_unix_ms: 0, leading: false, decision: None };
/// assert!(!s.paused_at(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steering {
    /// The fleet's rate in force, per second.
    pub rate: f64,
    /// Nothing is to be sent before this (unix ms; 0: no pause): the
    /// receiver's `Retry-After` on a congestion cut.
    pub pause_until_unix_ms: u64,
    /// Whether this node holds the lease (it decides for the fleet).
    pub leading: bool,
    /// The decision this node made in this report, if it made one.
    pub decision: Option<Decision>,
}

impl Steering {
    /// Whether sending is paused at `unix_ms`.
    ///
    /// ```
    /// let s = dripfeed::global::Steering { rate: 80.0, pause_until_unix_ms: 1_000, leading: true, decision: None };
    /// assert!(s.paused_at(999) && !s.paused_at(1_000));
    /// ```
    pub fn paused_at(&self, unix_ms: u64) -> bool {
        unix_ms < self.pause_until_unix_ms
    }
}

/// One adaptive rate for a fleet of nodes sending to the same downstream:
/// the AIMD controller the single-node drain uses ([`Aimd`]), fed with what
/// every node measured and deciding once per interval for all of them.
///
/// Each node calls [`report`](Self::report) about once a second with a
/// [`Tally`] of its attempts since its last report; one script adds it to
/// that second's tally in Redis (a small hash of latency buckets and
/// counters, not a write per attempt), renews or takes the lease, and
/// answers the rate in force. The node holding the lease (3 s, renewed by
/// each report) also gets the last five seconds' tallies, merged over the
/// fleet, so the p99 it judges is over every node's samples (never an
/// average of each node's p99). It decides with its controller and writes
/// the rate back, kept only while it still holds the lease: one decision
/// per interval for the fleet. When it dies the lease expires and the next
/// node to report takes it over with a fresh controller, from the rate in
/// force: a take-over moves the rate by at most one controller step.
///
/// Every node then paces itself and its share of a fleet limit (a
/// [`RedisRate`](super::RedisRate) with [`set_rate`](super::RedisRate::set_rate))
/// at the rate answered. The fleet is busy (the controller may raise the
/// rate) when in the last two seconds some node started deliveries and
/// none found its queue empty. Round trips: one per node per report, one
/// more for the deciding node when the rate moves.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use dripfeed::global::{RedisAimd, RedisConnection};
/// use dripfeed::rate::{AimdConfig, Tally};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// let aimd = AimdConfig::default().with_target_p99(Duration::from_millis(200));
/// let fleet = RedisAimd::new(conn, "billing", "node-a", aimd, 100.0)?;
/// let mut tally = Tally::default();
/// tally.record(Duration::from_millis(40));
/// tally.worked += 1;
/// let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
/// let steering = fleet.report(tokio::time::Instant::now(), unix_ms, &tally).await?;
/// assert!(steering.rate >= 20.0);
/// # Ok(())
/// # }
/// ```
pub struct RedisAimd {
    conn: RedisConnection,
    prefix: String,
    node: String,
    start: String,
    fresh: Aimd,
    /// The controller while this node leads (fresh at each take-over).
    leading: Mutex<Option<Aimd>>,
    script: Script,
}

impl fmt::Debug for RedisAimd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisAimd")
            .field("prefix", &self.prefix)
            .field("node", &self.node)
            .field("start", &self.start)
            .finish()
    }
}

impl RedisAimd {
    /// The adaptive rate of `name` (Redis keys `dripfeed:aimd:{NAME}:…`)
    /// as seen by `node` (unique in the fleet), deciding with `config`
    /// from `start` per second (clamped into the floor and ceiling). A
    /// fleet whose nodes give another start rate (a destination's rate
    /// changed) starts again from it. Round trips counted as `aimd`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::{RedisAimd, RedisConnection};
    /// use dripfeed::rate::{AimdConfig, AimdError};
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let bad = AimdConfig::default().with_floor(0.0);
    /// assert_eq!(RedisAimd::new(conn, "billing", "a", bad, 50.0).unwrap_err(), AimdError::Floor(0.0));
    /// # }
    /// ```
    pub fn new(
        conn: RedisConnection,
        name: &str,
        node: &str,
        config: AimdConfig,
        start: f64,
    ) -> Result<RedisAimd, AimdError> {
        let fresh = config.build()?;
        let (floor, ceiling) = (fresh.config().floor(), fresh.config().ceiling());
        let start = if start.is_finite() {
            start.clamp(floor, ceiling)
        } else {
            floor
        };
        Ok(RedisAimd {
            conn: conn.counted_as("aimd"),
            prefix: format!("dripfeed:aimd:{{{name}}}:"),
            node: node.to_owned(),
            start: start.to_string(),
            fresh,
            leading: Mutex::new(None),
            script: Script::new(include_str!("scripts/aimd.lua")),
        })
    }

    fn key(&self, what: &str) -> String {
        format!("{}{what}", self.prefix)
    }

    /// Adds `tally` (this node's attempts since its last report) to the
    /// fleet's view at `unix_ms`, and answers the fleet's rate. The node
    /// holding the lease decides too, at most once per the controller's
    /// interval (by `now`, the clock its decisions are timed with). One
    /// round trip; two when the rate moves.
    pub async fn report(
        &self,
        now: Instant,
        unix_ms: u64,
        tally: &Tally,
    ) -> Result<Steering, RedisError> {
        let second = unix_ms / 1000;
        let mut call = self.script.prepare_invoke();
        call.key(self.key("rate")).key(self.key("lease"));
        for s in (0..WINDOW_SECONDS).rev() {
            call.key(self.key(&format!("s{}", second.saturating_sub(s))));
        }
        call.arg("report")
            .arg(&self.node)
            .arg(LEASE.as_millis() as u64)
            .arg((WINDOW_SECONDS + 2) * 1000)
            .arg(&self.start);
        for (field, n) in tally.fields() {
            call.arg(field).arg(n);
        }
        let mut conn = self.conn.clone();
        let answer: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let items = array(answer, 4, "aimd report")?;
        let mut steering = Steering {
            rate: number(&items[0], "aimd rate")?,
            pause_until_unix_ms: count(&items[1])?,
            leading: count(&items[2])? == 1,
            decision: None,
        };
        let taken = count(&items[3])? == 1;
        if !steering.leading {
            *self.controller() = None;
            return Ok(steering);
        }
        let seconds: Vec<Tally> = items[4..].iter().map(tally_of).collect();
        let mut window = Tally::default();
        for s in &seconds {
            window.merge(s);
        }
        let mut recent = Tally::default();
        for s in seconds.iter().rev().take(2) {
            recent.merge(s);
        }
        let busy = recent.idle == 0 && recent.worked > 0;
        let decision = {
            let mut held = self.controller();
            if taken || held.is_none() {
                *held = Some(self.fresh.clone());
            }
            match held.as_mut() {
                Some(aimd) => aimd.decide(now, steering.rate, &window.summary(), busy),
                None => return Ok(steering),
            }
        };
        if decision.changed() {
            let pause = decision.pause.map_or(steering.pause_until_unix_ms, |p| {
                unix_ms.saturating_add(p.as_millis() as u64)
            });
            let mut set = self.script.prepare_invoke();
            set.key(self.key("rate"))
                .key(self.key("lease"))
                .arg("set")
                .arg(&self.node)
                .arg(decision.rate.to_string())
                .arg(pause);
            let kept: Value = bounded(set.invoke_async(&mut conn), CALL).await?;
            if count(&kept)? == 1 {
                steering.rate = decision.rate;
                steering.pause_until_unix_ms = pause;
            } else {
                *self.controller() = None;
                steering.leading = false;
                return Ok(steering);
            }
        }
        steering.decision = Some(decision);
        Ok(steering)
    }

    fn controller(&self) -> std::sync::MutexGuard<'_, Option<Aimd>> {
        self.leading.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A second's tally from its HGETALL (flat pairs, or a map).
fn tally_of(v: &Value) -> Tally {
    let pairs: Vec<(String, u64)> = match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((text(p.first()?)?, count(p.get(1)?).ok()?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, count(v).ok()?)))
            .collect(),
        _ => Vec::new(),
    };
    Tally::from_fields(pairs.iter().map(|(f, n)| (f.as_str(), *n)))
}
