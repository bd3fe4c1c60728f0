//! [`RedisEvents`]: the fleet's events kept in Redis, each application's
//! under its own hash tag (`dripfeed:ev:{app:NAME}:…`, one Redis Cluster
//! slot): the records (an event's application, type, tenant, key and the
//! endpoints its copies go to), the payloads, the ids in order, the ids
//! whose copies are not all queued yet, the idempotency keys, and each
//! copy's end, resends and attempts.
//!
//! An event is taken in one script ([`RedisEvents::post`]): durable with
//! its list of copies before its 202, and due for fan-out; the copies are
//! queued afterwards, each into its endpoint's queue under the event's id
//! (so a fan-out made twice, by a relay that died and by the one that
//! took over, makes each copy once), and then it is marked fanned out
//! ([`RedisEvents::fanned_out`]). Old events are forgotten by the script
//! that takes a new one (at most 64 at a time), by age and by count.

use redis::{Script, Value};
use serde::{Deserialize, Serialize};

use dripfeed::global::{RedisConnection, RedisError};

use super::{CALL, array, bounded, bytes, count, text};
use crate::events::record::{AttemptRecord, EventRecord, MAX_ATTEMPTS};

/// The scripts, made once and shared by every instance (each holds its
/// Lua source: one copy per destination would cost kilobytes each).
static POST: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/event_post.lua")));
static TELL: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/event_tell.lua")));
static COPIES: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/event_copies.lua")));

/// An id as the sorted sets hold it: 20 digits, so text order is number
/// order.
pub(crate) fn padded(id: u64) -> String {
    format!("{id:020}")
}

/// An event as the records hold it: its record, and its scoped
/// idempotency key (forgotten with it).
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    record: EventRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scoped: Option<String>,
}

/// What [`RedisEvents::post`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Taken under the id given.
    New,
    /// Its idempotency key was seen: the event taken then, and its copies.
    Repeat {
        /// That event's id.
        id: u64,
        /// Its copies.
        copies: usize,
    },
    /// An event holds this id already: nothing written, draw another.
    Taken,
}

/// Where an event's copy is, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Not ended as far as these records know.
    No,
    /// Delivered.
    Delivered,
    /// Dead-lettered, with its reason.
    DeadLettered(String),
    /// Granted a resend or a recover at this time (Unix ms by Redis's
    /// clock), not sent yet or on its way.
    Again(u64),
}

impl Ended {
    fn parse(raw: &str) -> Ended {
        if let Some(at) = raw.strip_prefix("s|") {
            return Ended::Again(at.parse().unwrap_or(0));
        }
        match raw {
            "d" => Ended::Delivered,
            "" => Ended::No,
            other => Ended::DeadLettered(other.strip_prefix("x|").unwrap_or(other).to_owned()),
        }
    }

    fn text(&self) -> String {
        match self {
            Ended::No => String::new(),
            Ended::Delivered => "d".to_owned(),
            Ended::DeadLettered(reason) => format!("x|{reason}"),
            Ended::Again(at) => format!("s|{at}"),
        }
    }
}

/// The applications whose events may wait for a fan-out (a sorted set
/// by the time of their last post, ms): what the sweep looks at.
const PENDING: &str = "dripfeed:ev:{pending}";

/// A copy as recorded: its end, its resends, its attempts (oldest first).
#[derive(Debug, Clone)]
pub(crate) struct CopyRead {
    pub ended: Ended,
    pub resent: u32,
    pub attempts: Vec<AttemptRecord>,
}

/// One application's keys.
struct Keys {
    prefix: String,
}

impl Keys {
    fn of(app: &str) -> Keys {
        Keys {
            prefix: format!("dripfeed:ev:{{app:{app}}}"),
        }
    }
    fn records(&self) -> String {
        format!("{}:r", self.prefix)
    }
    fn payloads(&self) -> String {
        format!("{}:p", self.prefix)
    }
    fn ids(&self) -> String {
        format!("{}:z", self.prefix)
    }
    fn unqueued(&self) -> String {
        format!("{}:x", self.prefix)
    }
    fn keys(&self) -> String {
        format!("{}:k", self.prefix)
    }
    fn copies(&self) -> String {
        format!("{}:c", self.prefix)
    }
    fn attempts(&self, id: u64, endpoint: &str) -> String {
        format!("{}:a:{}:{endpoint}", self.prefix, padded(id))
    }
}

/// The fleet's events in Redis (see the [module](self) docs).
#[derive(Clone)]
pub(crate) struct RedisEvents {
    conn: RedisConnection,
    post: &'static Script,
    tell: &'static Script,
    copies: &'static Script,
    settled: Script,
    /// How long events are kept, ms.
    retention_ms: u64,
    /// The most events an application keeps.
    most: u64,
}

/// The ids a post is bounded by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Events older than this are forgotten.
    pub(crate) oldest: u64,
    /// The application's first id: a key naming an earlier event is an
    /// earlier application's of the same name (deleted since).
    pub(crate) since: u64,
}

impl RedisEvents {
    /// The events over `conn`, each kept `retention_ms` and at most `most`
    /// per application.
    pub(crate) fn new(conn: RedisConnection, retention_ms: u64, most: u64) -> RedisEvents {
        RedisEvents {
            conn: conn.counted_as("events"),
            post: &POST,
            tell: &TELL,
            copies: &COPIES,
            settled: Script::new(
                "if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then \
                 return redis.call('ZREM', KEYS[1], ARGV[1]) end return 0",
            ),
            retention_ms,
            most,
        }
    }

    /// How long events are kept, ms.
    pub(crate) fn retention_ms(&self) -> u64 {
        self.retention_ms
    }

    /// Takes event `id` of `app` (`record`, `payload`), unless its scoped
    /// idempotency key `scoped` names one taken before, from the bounds'
    /// `since` on; forgets events older than their `oldest`. One round trip, on `on` if given (a
    /// connection a `WAIT` follows on, [`wait`](Self::wait)).
    pub(crate) async fn post(
        &self,
        on: Option<&RedisConnection>,
        id: u64,
        record: &EventRecord,
        payload: &[u8],
        scoped: Option<&str>,
        Bounds { oldest, since }: Bounds,
    ) -> Result<Posted, RedisError> {
        let k = Keys::of(&record.app);
        let stored = Stored {
            record: record.clone(),
            scoped: scoped.map(str::to_owned),
        };
        let json = serde_json::to_string(&stored)
            .map_err(|_| RedisError::unexpected("an event record"))?;
        let mut conn = on.unwrap_or(&self.conn).clone();
        let mut call = self.post.prepare_invoke();
        call.key(k.records())
            .key(k.payloads())
            .key(k.ids())
            .key(k.unqueued())
            .key(k.keys())
            .key(k.copies())
            .arg(padded(id))
            .arg(json)
            .arg(payload)
            .arg(scoped.unwrap_or(""))
            .arg(record.copies.len())
            .arg(padded(oldest))
            .arg(self.most)
            .arg(self.retention_ms.max(1))
            .arg(if on.is_some() { "1" } else { "0" })
            .arg(padded(since));
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let items = array(v, 3, "event post")?;
        match text(&items[0]).as_deref() {
            Some("new") => Ok(Posted::New),
            Some("taken") => Ok(Posted::Taken),
            Some("repeat") => Ok(Posted::Repeat {
                id: number(&items[1])?,
                copies: usize::try_from(count(&items[2])?).unwrap_or(usize::MAX),
            }),
            _ => Err(RedisError::unexpected("event post")),
        }
    }

    /// Waits (100 ms at most) for `replicas` replicas to have what was
    /// written through `conn`: `None` once they have, else how many did.
    pub(crate) async fn wait(&self, conn: &RedisConnection, replicas: u32) -> Option<u64> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(100);
        match bounded(wait.query_async::<u64>(&mut conn.clone()), CALL).await {
            Ok(n) if n >= u64::from(replicas) => None,
            Ok(n) => Some(n),
            Err(e) => {
                tracing::debug!(error = %e, "the fleet's events: WAIT failed after a post; unconfirmed");
                Some(0)
            }
        }
    }

    /// Event `id` of `app`, if kept. One round trip.
    pub(crate) async fn record(
        &self,
        app: &str,
        id: u64,
    ) -> Result<Option<EventRecord>, RedisError> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(Keys::of(app).records()).arg(padded(id));
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        Ok(text(&v)
            .and_then(|raw| serde_json::from_str::<Stored>(&raw).ok())
            .map(|s| s.record))
    }

    /// Event `id`'s payload, if kept. One round trip.
    pub(crate) async fn payload(&self, app: &str, id: u64) -> Result<Option<Vec<u8>>, RedisError> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(Keys::of(app).payloads()).arg(padded(id));
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        Ok(bytes(&v))
    }

    /// Events `ids` of `app` (each `None` if no longer kept). One round
    /// trip.
    pub(crate) async fn records(
        &self,
        app: &str,
        ids: &[u64],
    ) -> Result<Vec<Option<EventRecord>>, RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(Keys::of(app).records());
        for id in ids {
            cmd.arg(padded(*id));
        }
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        let items = array(v, ids.len(), "event records")?;
        Ok(items
            .iter()
            .map(|v| {
                text(v)
                    .and_then(|raw| serde_json::from_str::<Stored>(&raw).ok())
                    .map(|s| s.record)
            })
            .collect())
    }

    /// At most `n` of `app`'s event ids, newest first, before `before`
    /// (`None`: from the newest). One round trip.
    pub(crate) async fn newest(
        &self,
        app: &str,
        before: Option<u64>,
        n: usize,
    ) -> Result<Vec<u64>, RedisError> {
        let mut cmd = redis::cmd("ZREVRANGEBYLEX");
        cmd.arg(Keys::of(app).ids())
            .arg(before.map_or_else(|| "+".to_owned(), |b| format!("({}", padded(b))))
            .arg("-")
            .arg("LIMIT")
            .arg(0)
            .arg(n.max(1));
        self.ids(cmd).await
    }

    /// At most `n` of `app`'s event ids from `from` to before `to`, oldest
    /// first; one round trip.
    pub(crate) async fn window(
        &self,
        app: &str,
        (from, to): (u64, u64),
        n: usize,
    ) -> Result<Vec<u64>, RedisError> {
        let mut cmd = redis::cmd("ZRANGEBYLEX");
        cmd.arg(Keys::of(app).ids())
            .arg(format!("[{}", padded(from)))
            .arg(format!("({}", padded(to)))
            .arg("LIMIT")
            .arg(0)
            .arg(n.max(1));
        self.ids(cmd).await
    }

    /// At most `n` of `app`'s events whose copies may not all be queued
    /// yet, after `after` (`None`: from the oldest) and taken before
    /// `before` (an id), oldest first; one round trip.
    pub(crate) async fn unqueued(
        &self,
        app: &str,
        after: Option<u64>,
        before: u64,
        n: usize,
    ) -> Result<Vec<u64>, RedisError> {
        let mut cmd = redis::cmd("ZRANGEBYLEX");
        cmd.arg(Keys::of(app).unqueued())
            .arg(after.map_or_else(|| "-".to_owned(), |a| format!("({}", padded(a))))
            .arg(format!("({}", padded(before)))
            .arg("LIMIT")
            .arg(0)
            .arg(n.max(1));
        self.ids(cmd).await
    }

    /// Event `id`'s copies are all queued (or dead-lettered). One round
    /// trip.
    pub(crate) async fn fanned_out(&self, app: &str, id: u64) -> Result<(), RedisError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(Keys::of(app).unqueued()).arg(padded(id));
        let _: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        Ok(())
    }

    async fn ids(&self, cmd: redis::Cmd) -> Result<Vec<u64>, RedisError> {
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        array(v, 0, "event ids")?.iter().map(number).collect()
    }

    /// Records an attempt of `endpoint`'s copy of event `id` (with the
    /// copy's end, if it was its last). One round trip.
    pub(crate) async fn attempted(
        &self,
        app: &str,
        id: u64,
        endpoint: &str,
        attempt: &AttemptRecord,
        ended: Ended,
    ) -> Result<(), RedisError> {
        let json = serde_json::to_string(attempt)
            .map_err(|_| RedisError::unexpected("an attempt record"))?;
        self.told(app, id, endpoint, "a", &json, &ended.text())
            .await
            .map(|_| ())
    }

    /// Records `endpoint`'s copy of event `id` ended. One round trip.
    pub(crate) async fn ended(
        &self,
        app: &str,
        id: u64,
        endpoint: &str,
        ended: Ended,
    ) -> Result<(), RedisError> {
        self.told(app, id, endpoint, "e", &ended.text(), "")
            .await
            .map(|_| ())
    }

    /// Grants `endpoint`'s copy of event `id` a resend: marked on its way
    /// again (read as pending) unless it was already within the last
    /// `hold_ms`. Whether it was granted; one round trip.
    pub(crate) async fn again(
        &self,
        app: &str,
        id: u64,
        endpoint: &str,
        hold_ms: u64,
    ) -> Result<bool, RedisError> {
        let v = self
            .told(app, id, endpoint, "g", &hold_ms.to_string(), "")
            .await?;
        Ok(count(&v)? == 1)
    }

    /// Notes that `app` posts now (before its event is written): the
    /// sweep looks at it once its events may be late. One round trip.
    pub(crate) async fn posting(&self, app: &str, now_ms: u64) -> Result<(), RedisError> {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(PENDING).arg(now_ms).arg(app);
        let _: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        Ok(())
    }

    /// At most `n` applications that last posted before `before_ms`, with
    /// the time noted (as Redis holds it). One round trip.
    pub(crate) async fn posted_before(
        &self,
        before_ms: u64,
        n: usize,
    ) -> Result<Vec<(String, String)>, RedisError> {
        // Redis reads LIMIT's count as a signed 64-bit number: a larger one
        // is an error, not "all".
        let most = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
        let mut cmd = redis::cmd("ZRANGEBYSCORE");
        cmd.arg(PENDING)
            .arg("-inf")
            .arg(format!("({before_ms}"))
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(most);
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        let items = array(v, 0, "applications posting")?;
        Ok(items
            .chunks(2)
            .filter_map(|p| match p {
                [a, t] => Some((text(a)?, text(t)?)),
                _ => None,
            })
            .collect())
    }

    /// `app` has no event waiting for its fan-out: forgotten by the sweep,
    /// unless it posted again since `noted` (the time read). One round
    /// trip.
    pub(crate) async fn settled(&self, app: &str, noted: &str) -> Result<(), RedisError> {
        let mut call = self.settled.prepare_invoke();
        call.key(PENDING).arg(app).arg(noted);
        let _: Value = bounded(call.invoke_async(&mut self.conn.clone()), CALL).await?;
        Ok(())
    }

    /// Whether any of `app`'s events waits for its fan-out. One round
    /// trip.
    pub(crate) async fn any_unqueued(&self, app: &str) -> Result<bool, RedisError> {
        let mut cmd = redis::cmd("ZCARD");
        cmd.arg(Keys::of(app).unqueued());
        let v: Value = bounded(cmd.query_async(&mut self.conn.clone()), CALL).await?;
        Ok(count(&v)? > 0)
    }

    async fn told(
        &self,
        app: &str,
        id: u64,
        endpoint: &str,
        what: &str,
        value: &str,
        end: &str,
    ) -> Result<Value, RedisError> {
        let k = Keys::of(app);
        let mut call = self.tell.prepare_invoke();
        call.key(k.records())
            .key(k.copies())
            .key(k.attempts(id, endpoint))
            .arg(padded(id))
            .arg(format!("{}\n{endpoint}", padded(id)))
            .arg(what)
            .arg(value)
            .arg(MAX_ATTEMPTS)
            .arg(self.retention_ms.max(1))
            .arg(end);
        bounded(call.invoke_async(&mut self.conn.clone()), CALL).await
    }

    /// The copies of event `id` to `endpoints`, as recorded. One round
    /// trip.
    pub(crate) async fn copies(
        &self,
        app: &str,
        id: u64,
        endpoints: &[String],
    ) -> Result<Vec<CopyRead>, RedisError> {
        if endpoints.is_empty() {
            return Ok(Vec::new());
        }
        let k = Keys::of(app);
        let mut call = self.copies.prepare_invoke();
        call.key(k.copies());
        for e in endpoints {
            call.key(k.attempts(id, e));
        }
        for e in endpoints {
            call.arg(format!("{}\n{e}", padded(id)));
        }
        let v: Value = bounded(call.invoke_async(&mut self.conn.clone()), CALL).await?;
        let items = array(v, endpoints.len(), "event copies")?;
        items
            .into_iter()
            .map(|item| {
                let parts = array(item, 3, "an event copy")?;
                let attempts = match &parts[2] {
                    Value::Array(list) => list
                        .iter()
                        .filter_map(|a| text(a).and_then(|t| serde_json::from_str(&t).ok()))
                        .collect(),
                    _ => Vec::new(),
                };
                Ok(CopyRead {
                    ended: Ended::parse(&text(&parts[0]).unwrap_or_default()),
                    resent: u32::try_from(count(&parts[1]).unwrap_or(0)).unwrap_or(u32::MAX),
                    attempts,
                })
            })
            .collect()
    }
}

/// An id Redis sent as text (padded or not).
fn number(v: &Value) -> Result<u64, RedisError> {
    text(v)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| RedisError::unexpected("an event id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_as_text_and_ends_read_back() {
        assert!(padded(9) < padded(10));
        assert!(padded(u64::MAX - 1) < padded(u64::MAX));
        assert_eq!(padded(42).len(), 20);
        for end in [
            Ended::No,
            Ended::Delivered,
            Ended::DeadLettered("overflow".into()),
            Ended::Again(1_795_923_402_309),
        ] {
            assert_eq!(Ended::parse(&end.text()), end);
        }
    }
}
