//! [`RedisAimd`]: one adaptive rate for a fleet, decided by one node at a
//! time from what every node measured.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use redis::{Script, Value};
use tokio::time::Instant;

use super::conn::{CALL, RedisConnection, RedisError, array, bounded, count, number, text};
use crate::rate::{Action, Aimd, AimdConfig, AimdError, Decision, Tally};

/// The script, made once and shared by every instance (it holds its Lua
/// source: one copy per instance would cost kilobytes each).
static AIMD: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/aimd.lua")));

/// Seconds of tallies the deciding node reads: the controller's window.
const WINDOW_SECONDS: u64 = 5;
/// Seconds the ring of tallies in Redis holds (more than the window).
const RING: u64 = 8;
/// How long the deciding node's lease lasts without a report renewing it.
const LEASE: Duration = Duration::from_secs(3);

/// What [`RedisAimd::report`] learned: the fleet's rate and pause, and
/// whether this node decided them.
///
/// ```
/// use std::time::Duration;
/// let s = dripfeed::global::Steering { rate: 80.0, pause: None, leading: false, decision: None };
/// assert!(s.pause.is_none() && !s.leading);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steering {
    /// The fleet's rate in force, per second (within the floor and
    /// ceiling).
    pub rate: f64,
    /// Send nothing for this long: the receiver's `Retry-After` on a
    /// congestion cut (on Redis's clock, so every node pauses together).
    pub pause: Option<Duration>,
    /// Whether this node holds the lease (it decides for the fleet).
    pub leading: bool,
    /// The decision this node made in this report, if it made one.
    pub decision: Option<Decision>,
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
/// per interval for the fleet. With the rate it keeps when the last cut was
/// and where the downstream last ran out of room, so when it dies (its
/// lease expires) or stops ([`release`](Self::release)), the next node to
/// report takes over from the rate in force and a controller
/// [resumed](Aimd::resume) from them: the evidence the last cut answered
/// does not cut twice, and a take-over moves the rate by at most one
/// controller step. Seconds and pauses are on Redis's clock (`TIME`), so
/// nodes' clocks never matter.
///
/// Every node then paces itself and its share of a fleet limit (a
/// [`RedisRate`](super::RedisRate) with [`set_rate`](super::RedisRate::set_rate))
/// at the rate answered. The fleet is busy (the controller may raise the
/// rate) when in the last two seconds some node started deliveries and
/// none found its queue empty (one node's empty look, while others hold
/// what is queued, holds the rate for those seconds). Round trips: one per node per report, one
/// more for the deciding node when the rate moves.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use dripfeed::global::{RedisAimd, RedisConnection};
/// use dripfeed::rate::{AimdConfig, Tally};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// let aimd = AimdConfig::default().with_target_p99(Duration::from_millis(200));
/// let fleet = RedisAimd::new(conn, "billing", "node-a", aimd, 100.0)?;
/// let mut tally = Tally::default();
/// tally.record(Duration::from_millis(40));
/// tally.worked += 1;
/// let steering = fleet.report(tokio::time::Instant::now(), &tally).await?;
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
    script: &'static Script,
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
            script: &AIMD,
        })
    }

    fn key(&self, what: &str) -> String {
        format!("{}{what}", self.prefix)
    }

    /// Adds `tally` (this node's attempts since its last report) to the
    /// fleet's view for the current second, and answers the fleet's rate.
    /// The node holding the lease decides too, at most once per the
    /// controller's interval (by `now`, the clock its decisions are timed
    /// with); a decision Redis did not keep (the lease moved, Redis
    /// failed) leaves the rate as it was and this node not leading. One
    /// round trip; two when the rate moves.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisAimd, RedisConnection};
    /// # use dripfeed::rate::{AimdConfig, Tally};
    /// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
    /// let fleet = RedisAimd::new(conn, "docs-report", "a", AimdConfig::default(), 50.0)?;
    /// let first = fleet.report(tokio::time::Instant::now(), &Tally::default()).await?;
    /// assert!(first.leading, "the first to report leads");
    /// assert_eq!(first.rate, 50.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn report(&self, now: Instant, tally: &Tally) -> Result<Steering, RedisError> {
        let mut call = self.script.prepare_invoke();
        call.key(self.key("rate")).key(self.key("lease"));
        for s in 0..RING {
            call.key(self.key(&format!("s{s}")));
        }
        call.arg("report")
            .arg(&self.node)
            .arg(LEASE.as_millis() as u64)
            .arg(&self.start)
            .arg(WINDOW_SECONDS);
        for (field, n) in tally.fields() {
            call.arg(field).arg(n);
        }
        let mut conn = self.conn.clone();
        let answer: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let items = array(answer, 6, "aimd report")?;
        let rate = number(&items[0], "aimd rate")?;
        let config = self.fresh.config();
        if !rate.is_finite() {
            return Err(RedisError::unexpected("aimd rate not finite"));
        }
        let pause = count(&items[1])?;
        let mut steering = Steering {
            rate: rate.clamp(config.floor(), config.ceiling()),
            pause: (pause > 0).then(|| Duration::from_millis(pause)),
            leading: count(&items[2])? == 1,
            decision: None,
        };
        let taken = count(&items[3])? == 1;
        if !steering.leading {
            *self.controller() = None;
            return Ok(steering);
        }
        let since_cut = number(&items[4], "aimd cut")
            .ok()
            .filter(|ms| *ms >= 0.0)
            .map(|ms| Duration::from_millis(ms as u64));
        let reference = text(&items[5]).and_then(|r| r.parse::<f64>().ok());
        let seconds: Vec<Tally> = items[6..].iter().map(tally_of).collect();
        let mut window = Tally::default();
        for s in &seconds {
            window.merge(s);
        }
        let mut recent = Tally::default();
        for s in seconds.iter().rev().take(2) {
            recent.merge(s);
        }
        let busy = recent.idle == 0 && recent.worked > 0;
        let mut summary = window.summary();
        // What the downstream delivered per second: over the whole seconds
        // the fleet reported in (not the one under way, nor the first it
        // reported in, which may have started part of the way through).
        let whole = &seconds[..seconds.len().saturating_sub(1)];
        if let Some(first) = whole.iter().position(|t| !t.is_empty()) {
            let counted = &whole[first + 1..];
            if counted.len() >= 2 {
                let delivered: u64 = counted.iter().map(Tally::samples).sum();
                summary.throughput = delivered as f64 / counted.len() as f64;
            }
        }
        let (decision, reference) = {
            let mut held = self.controller();
            if taken {
                *held = None;
            }
            let aimd = held.get_or_insert_with(|| {
                // Taking over: where the last leader left the controller.
                let mut aimd = self.fresh.clone();
                aimd.resume(now, reference, since_cut, &summary);
                aimd
            });
            let d = aimd.decide(now, steering.rate, &summary, busy);
            (d, aimd.reference_rate())
        };
        if decision.changed() {
            let pause = decision.pause.unwrap_or_default();
            let mut set = self.script.prepare_invoke();
            set.key(self.key("rate"))
                .key(self.key("lease"))
                .arg("set")
                .arg(&self.node)
                .arg(decision.rate.to_string())
                .arg(pause.as_millis() as u64)
                .arg(&self.start)
                .arg(match decision.action {
                    Action::Decrease { .. } => "1",
                    _ => "0",
                })
                .arg(reference.map(|r| r.to_string()).unwrap_or_default());
            let kept = bounded(set.invoke_async::<Value>(&mut conn), CALL).await;
            if !matches!(kept.as_ref().map(count), Ok(Ok(1))) {
                // Not kept (the lease or the start rate changed, or Redis
                // failed): the rate stays, and this node decides afresh
                // if it leads again. Its tally was added already.
                *self.controller() = None;
                steering.leading = false;
                return Ok(steering);
            }
            steering.rate = decision.rate;
            if !pause.is_zero() {
                steering.pause = Some(pause);
            }
        }
        steering.decision = Some(decision);
        Ok(steering)
    }

    /// Ends this node's lease at once if it holds it (it stops deciding:
    /// another node takes over at its next report instead of after the
    /// lease's life). Whether it held it. One round trip.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisAimd, RedisConnection};
    /// # use dripfeed::rate::{AimdConfig, Tally};
    /// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
    /// let a = RedisAimd::new(conn.clone(), "docs-release", "a", AimdConfig::default(), 50.0)?;
    /// let b = RedisAimd::new(conn, "docs-release", "b", AimdConfig::default(), 50.0)?;
    /// let now = tokio::time::Instant::now();
    /// assert!(a.report(now, &Tally::default()).await?.leading);
    /// assert!(a.release().await?);
    /// assert!(b.report(now, &Tally::default()).await?.leading, "b takes it at once");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(&self) -> Result<bool, RedisError> {
        let mut call = self.script.prepare_invoke();
        call.key(self.key("rate"))
            .key(self.key("lease"))
            .arg("release")
            .arg(&self.node);
        let mut conn = self.conn.clone();
        let answer: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        Ok(count(&answer)? == 1)
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
