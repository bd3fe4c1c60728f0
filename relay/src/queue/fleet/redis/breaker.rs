//! One destination's circuit breaker in Redis, shared by every relay of the
//! fleet (`scripts/breaker.lua`): the relays' attempts' ends open it (the
//! library's rule: a run of failures, or a failed share of the last
//! attempts), it stays open for a cool-down on Redis's clock, then one
//! relay at a time probes (its lease lets another probe if it dies), and
//! the probe's end closes it or opens it for twice as long.

use std::time::Duration;

use dripfeed::global::{RedisConnection, RedisError};
use redis::{Script, Value};

use super::{CALL, array, bounded, count, text};

/// The script, made once and shared by every instance (it holds its Lua
/// source: one copy per instance would cost kilobytes each).
static BREAKER: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/breaker.lua")));

/// The breaker's rule: when it opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rule {
    /// Opens after this many failures in a row.
    pub trip_after: u32,
    /// Or once this many attempts were seen, with `share` of them failed.
    pub window: u32,
    pub share: f64,
    /// The first cool-down and the longest.
    pub cool: Duration,
    pub max_cool: Duration,
    /// How long a relay's probe holds the half-open breaker.
    pub probe_lease: Duration,
}

/// The breaker as Redis answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub state: State,
    /// Until a probe may go (open), else zero.
    pub left: Duration,
    /// Times it opened, fleet-wide.
    pub opened: u64,
    /// This call opened it.
    pub opened_now: bool,
}

/// The breaker's state, as this relay may act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Closed,
    Open,
    /// Half open, this relay's to probe.
    Probe,
    /// Half open, another relay probing.
    Probed,
}

/// One attempt's end, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct End {
    pub failed: bool,
    /// The probe's.
    pub probe: bool,
}

/// See the [module](self) docs.
#[derive(Clone)]
pub(crate) struct RedisBreaker {
    conn: RedisConnection,
    key: String,
    node: std::sync::Arc<str>,
    rule: Rule,
    script: &'static Script,
}

impl RedisBreaker {
    /// The breaker of `destination` (its key beside the queue's, one
    /// cluster slot), seen by relay `node`.
    pub(crate) fn new(
        conn: &RedisConnection,
        destination: &str,
        node: std::sync::Arc<str>,
        rule: Rule,
    ) -> Self {
        RedisBreaker {
            conn: conn.counted_as("breaker"),
            key: format!("dripfeed:q:{{{destination}}}:b"),
            node,
            rule,
            script: &BREAKER,
        }
    }

    fn call(&self, op: &str) -> redis::ScriptInvocation<'_> {
        let r = &self.rule;
        let mut call = self.script.prepare_invoke();
        call.key(&self.key)
            .arg(op)
            .arg(&*self.node)
            .arg(r.cool.as_millis() as u64)
            .arg(r.max_cool.as_millis() as u64)
            .arg(r.trip_after)
            .arg(r.window)
            .arg(r.share)
            .arg(r.probe_lease.as_millis() as u64);
        call
    }

    /// How long a probe holds the half-open breaker.
    pub(crate) fn probe_lease(&self) -> Duration {
        self.rule.probe_lease
    }

    /// The breaker now; open past its cool-down (or half open past its
    /// probe's lease), this relay becomes the prober.
    pub(crate) async fn look(&self) -> Result<Seen, RedisError> {
        let call = self.call("look");
        let mut conn = self.conn.clone();
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        seen(v)
    }

    /// Counts this relay's attempts' `ends`, in order.
    pub(crate) async fn record(&self, ends: &[End]) -> Result<Seen, RedisError> {
        let mut call = self.call("record");
        for e in ends {
            call.arg(match (e.probe, e.failed) {
                (false, false) => "0",
                (false, true) => "1",
                (true, false) => "p0",
                (true, true) => "p1",
            });
        }
        let mut conn = self.conn.clone();
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        seen(v)
    }
}

fn seen(v: Value) -> Result<Seen, RedisError> {
    let items = array(v, 5, "breaker")?;
    let state = match (text(&items[0]).as_deref(), count(&items[2])?) {
        (Some("c"), _) => State::Closed,
        (Some("o"), _) => State::Open,
        (Some("h"), 1) => State::Probe,
        (Some("h"), _) => State::Probed,
        _ => return Err(RedisError::unexpected("breaker state")),
    };
    Ok(Seen {
        state,
        left: Duration::from_millis(count(&items[1])?),
        opened: count(&items[3])?,
        opened_now: count(&items[4])? == 1,
    })
}
