//! The consumer's side of a [`RedisQueue`]: claiming entries
//! (`XREADGROUP`, `XAUTOCLAIM`), settling them (acknowledged, ended,
//! released, held, retried) and promoting due retries. The queue's layout
//! and its admission are in [`super::queue`].

use std::time::Duration;

use redis::{Script, Value};

use dripfeed::global::{RedisConnection, RedisError};

use super::queue::{Claimed, GROUP, RedisQueue};
use super::queue_status::{Ending, JobStatus, Keep};
use super::{CALL, array, bounded, bytes, count, text};

/// The idle time a [`RedisQueue::release`]d entry is given: ten days,
/// beyond any take-over time (and, unlike a larger one, under the server's
/// clock, which Redis would otherwise take as no idle time at all).
const RELEASED_IDLE_MS: u64 = 10 * 86_400_000;

static SETTLE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_settle.lua")));
static DUE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_due.lua")));
static LOOKUP: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue_status.lua")));

/// A stream entry's fields: `id`, `n` (attempts), `job`.
fn claimed(entry: Value) -> Option<Claimed> {
    let Value::Array(mut parts) = entry else {
        return None;
    };
    if parts.len() < 2 {
        return None;
    }
    let fields = parts.pop()?;
    let stream_id = text(&parts[0])?;
    let Value::Array(fields) = fields else {
        return None; // deleted while pending (XAUTOCLAIM lists it as nil)
    };
    // A damaged entry (a field missing or unreadable) is still handed out,
    // its job empty if need be: its holder ends it (an empty job does not
    // decode), rather than leave it pending and taken over for ever.
    let (mut id, mut attempts, mut job) = (None, 0u32, None);
    for pair in fields.chunks(2) {
        let [k, v] = pair else { continue };
        match text(k).as_deref() {
            Some("id") => id = text(v),
            Some("n") => attempts = text(v).and_then(|n| n.parse().ok()).unwrap_or(0),
            Some("job") => job = bytes(v),
            _ => {}
        }
    }
    Some(Claimed {
        id: id.unwrap_or_else(|| stream_id.clone()),
        stream_id,
        attempts,
        job: job.unwrap_or_default(),
    })
}

impl RedisQueue {
    /// Makes the group if Redis lost it (a restart without persistence).
    async fn ensure_group(&self, conn: &RedisConnection) -> Result<(), RedisError> {
        let mut conn = conn.clone();
        let mut make = redis::cmd("XGROUP");
        make.arg("CREATE")
            .arg(self.stream_key())
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        match tokio::time::timeout(CALL, make.query_async::<()>(&mut conn)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e.code() == Some("BUSYGROUP") => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(RedisError::unexpected("XGROUP CREATE timed out")),
        }
    }

    /// Runs `cmd`, making the group again and retrying once if Redis says
    /// it has none.
    async fn grouped(&self, conn: &RedisConnection, cmd: &redis::Cmd) -> Result<Value, RedisError> {
        for _ in 0..2 {
            let mut conn = conn.clone();
            match tokio::time::timeout(CALL, cmd.query_async::<Value>(&mut conn)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if e.code() == Some("NOGROUP") => self.ensure_group(&conn).await?,
                Ok(Err(e)) => return Err(e.into()),
                // Sent and unanswered: a claim may have been made.
                Err(_) => return Err(RedisError::timeout()),
            }
        }
        Err(RedisError::unexpected("the group could not be made"))
    }

    /// Takes up to `max` new entries for this consumer (`XREADGROUP`,
    /// without blocking): they stay pending for it until acknowledged or
    /// retried, or reclaimed by another consumer once it has been gone long
    /// enough.
    pub(crate) async fn claim(&self, max: usize) -> Result<Vec<Claimed>, RedisError> {
        self.read_group(">", max).await
    }

    /// This consumer's own pending entries after stream id `after` (`"0"`
    /// from the first), up to `max`, oldest first: those it holds, and
    /// those a [`claim`](Self::claim) took for it whose answer never came
    /// back (Redis ran it after the relay stopped waiting).
    pub(crate) async fn own_pending(
        &self,
        after: &str,
        max: usize,
    ) -> Result<Vec<Claimed>, RedisError> {
        self.read_group(after, max).await
    }

    /// `XREADGROUP` for this consumer from `from` (`>`: new entries).
    async fn read_group(&self, from: &str, max: usize) -> Result<Vec<Claimed>, RedisError> {
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg("COUNT")
            .arg(max.max(1))
            .arg("STREAMS")
            .arg(self.stream_key())
            .arg(from);
        let reply = self.grouped(&self.conn.claim, &read).await?;
        // [[stream, [entry, …]]], or nil when there is nothing new.
        let Value::Array(streams) = reply else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for s in streams {
            let Value::Array(mut pair) = s else { continue };
            if let Some(Value::Array(entries)) = pair.pop() {
                out.extend(entries.into_iter().filter_map(claimed));
            }
        }
        Ok(out)
    }

    /// Takes over up to `max` entries pending for longer than `idle` with
    /// any consumer (`XAUTOCLAIM`), a dead node's among them, scanning from
    /// `cursor` (`"0-0"` to start); returns the cursor to go on from (Redis
    /// scans at most ten times `max` pending entries a call, so a caller
    /// taking few at a time keeps it to reach the whole list).
    pub(crate) async fn reclaim_from(
        &self,
        cursor: &str,
        idle: Duration,
        max: usize,
    ) -> Result<(String, Vec<Claimed>), RedisError> {
        let mut auto = redis::cmd("XAUTOCLAIM");
        auto.arg(self.stream_key())
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(u64::try_from(idle.as_millis()).unwrap_or(u64::MAX))
            .arg(cursor)
            .arg("COUNT")
            .arg(max.max(1));
        let reply = self.grouped(&self.conn.upkeep, &auto).await?;
        // [next cursor, [entry, …], [deleted id, …]]
        let mut parts = array(reply, 2, "XAUTOCLAIM")?;
        let Value::Array(entries) = parts.swap_remove(1) else {
            return Err(RedisError::unexpected("XAUTOCLAIM entries"));
        };
        let next = text(&parts[0]).unwrap_or_else(|| "0-0".to_owned());
        Ok((next, entries.into_iter().filter_map(claimed).collect()))
    }

    /// How many times `job`'s entry was handed to a consumer (claimed, or
    /// taken over; 0 if no longer pending): one round trip, counted as
    /// `queue_upkeep`. An entry taken over again and again is one whose
    /// holders keep dying with it.
    pub(crate) async fn deliveries(&self, job: &Claimed) -> Result<u64, RedisError> {
        let mut pending = redis::cmd("XPENDING");
        pending
            .arg(self.stream_key())
            .arg(GROUP)
            .arg(&job.stream_id)
            .arg(&job.stream_id)
            .arg(1);
        let reply = self.grouped(&self.conn.upkeep, &pending).await?;
        // [[id, consumer, idle ms, deliveries]], or [] when not pending.
        let Value::Array(mut rows) = reply else {
            return Ok(0);
        };
        let Some(Value::Array(row)) = rows.pop() else {
            return Ok(0);
        };
        row.get(3).map_or(Ok(0), count)
    }

    /// [`reclaim_from`](Self::reclaim_from) the start of the pending list.
    #[cfg(test)]
    pub(crate) async fn reclaim(
        &self,
        idle: Duration,
        max: usize,
    ) -> Result<Vec<Claimed>, RedisError> {
        Ok(self.reclaim_from("0-0", idle, max).await?.1)
    }

    /// Acknowledges and deletes entries this consumer holds (delivered),
    /// in one round trip; returns how many were still pending for the
    /// group.
    #[cfg(test)]
    pub(crate) async fn ack(&self, stream_ids: &[String]) -> Result<u64, RedisError> {
        let ends: Vec<Ending> = stream_ids
            .iter()
            .map(|id| Ending::delivered(id.clone(), None))
            .collect();
        self.end(&ends).await
    }

    /// Ends jobs this consumer holds, delivered or dead-lettered (their
    /// statuses, when kept, say which and the receiver's last answer):
    /// acknowledged and deleted, a batch in one round trip; returns how
    /// many were still pending for the group.
    pub(crate) async fn end(&self, ends: &[Ending]) -> Result<u64, RedisError> {
        if ends.is_empty() {
            return Ok(0);
        }
        let keep = self.keep.unwrap_or(Keep {
            retention: Duration::ZERO,
            max: 0,
        });
        let mut conn = self.conn.ack.clone();
        let mut call = self.settle_call("ack");
        call.arg(if self.keep.is_some() { "1" } else { "0" })
            .arg(keep.retention_ms())
            .arg(keep.max)
            .arg(self.dead_max);
        for e in ends {
            call.arg(&e.stream_id)
                .arg(match (e.dead_lettered, e.attempted) {
                    (false, _) => "d",
                    (true, true) => "x",
                    (true, false) => "z",
                })
                .arg(e.last_status.map(|s| s.to_string()).unwrap_or_default())
                .arg(&e.reason)
                .arg(&e.error);
        }
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        count(&v)
    }

    /// The status of job `id`, if kept ([`with_status`](Self::with_status))
    /// and not forgotten: one round trip, counted as `queue_status`.
    pub(crate) async fn status(&self, id: &str) -> Result<Option<JobStatus>, RedisError> {
        let mut conn = self.conn.status.clone();
        let mut call = LOOKUP.prepare_invoke();
        call.key(self.stream_key())
            .key(self.statuses_key())
            .arg(GROUP)
            .arg(id);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        if matches!(v, Value::Nil | Value::Boolean(false)) {
            return Ok(None);
        }
        let items = array(v, 2, "queue status")?;
        let record = text(&items[0]).unwrap_or_default();
        let held = text(&items[1]).as_deref() == Some("1");
        let error = items.get(2).and_then(text).filter(|e| !e.is_empty());
        Ok(JobStatus::parse(&record, held).map(|s| JobStatus {
            last_error: error,
            ..s
        }))
    }

    /// The settle script (`queue_settle.lua`) with its keys, the group and
    /// `op`: the rest of its arguments follow.
    fn settle_call(&self, op: &str) -> redis::ScriptInvocation<'_> {
        let mut call = self.script_with_keys(&SETTLE);
        call.arg(GROUP).arg(op);
        call
    }

    /// Hands back entries this consumer still holds and will not deliver
    /// (it is stopping): each is marked idle for ten days, so that
    /// another consumer's [`reclaim`](Self::reclaim_from) takes it at once
    /// instead of waiting out the take-over time. One round trip, counted
    /// as `queue_claim`; returns how many were handed back.
    pub(crate) async fn release(&self, jobs: &[Claimed]) -> Result<u64, RedisError> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let mut conn = self.conn.claim.clone();
        let mut call = self.settle_call("release");
        call.arg(&*self.consumer).arg(RELEASED_IDLE_MS);
        for j in jobs {
            call.arg(&j.stream_id);
        }
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        count(&v)
    }

    /// Starts `job`'s idle time again if this consumer still holds it
    /// (`XCLAIM … JUSTID`, one round trip, counted as `queue_claim`);
    /// `false` when another consumer took it over meanwhile: then it is
    /// not this consumer's to deliver. For a job held a while before it is
    /// sent, so that a take-over cannot start while it is delivered.
    pub(crate) async fn hold(&self, job: &Claimed) -> Result<bool, RedisError> {
        let mut conn = self.conn.claim.clone();
        let mut call = self.settle_call("hold");
        call.arg(&job.stream_id).arg(&*self.consumer);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        Ok(count(&v)? == 1)
    }

    /// Moves `job` to the retries, due `after` from now (the server's
    /// clock), with one more attempt counted; `false` when this consumer no
    /// longer holds it (another took it over): then nothing is retried.
    #[cfg(test)]
    pub(crate) async fn retry(&self, job: &Claimed, after: Duration) -> Result<bool, RedisError> {
        self.retry_answered(job, after, None).await
    }

    /// [`retry`](Self::retry), the job's status (when kept) noting the
    /// receiver's answer `status`.
    #[cfg(test)]
    pub(crate) async fn retry_answered(
        &self,
        job: &Claimed,
        after: Duration,
        status: Option<u16>,
    ) -> Result<bool, RedisError> {
        self.retry_failed(job, after, status, "").await
    }

    /// [`retry_answered`](Self::retry_failed), the job's status (when
    /// kept) noting the attempt's `error` too (`""`: none), as its
    /// [`JobStatus::last_error`].
    pub(crate) async fn retry_failed(
        &self,
        job: &Claimed,
        after: Duration,
        status: Option<u16>,
        error: &str,
    ) -> Result<bool, RedisError> {
        let made = job.attempts.saturating_add(1);
        let mut member = Vec::with_capacity(job.id.len() + job.job.len() + 12);
        member.extend_from_slice(job.id.as_bytes());
        member.push(b'\n');
        member.extend_from_slice(made.to_string().as_bytes());
        member.push(b'\n');
        member.extend_from_slice(&job.job);
        let mut conn = self.conn.retry.clone();
        let mut call = self.settle_call("retry");
        call.arg(&job.stream_id)
            .arg(u64::try_from(after.as_millis()).unwrap_or(u64::MAX))
            .arg(member)
            .arg(&*self.consumer)
            .arg(if self.keep.is_some() { "1" } else { "0" })
            .arg(status.map(|s| s.to_string()).unwrap_or_default())
            .arg(made)
            .arg(&job.id)
            .arg(error);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        Ok(count(&v)? == 1)
    }

    /// Moves up to `max` retries whose time has come back into the
    /// stream; returns how many. Up to `max` retries due more than
    /// `longest` from now (scheduled under a longer `retry_max`, lowered
    /// since, here or on another relay) are first moved to that time: the
    /// fleet's shortest `retry_max` holds.
    pub(crate) async fn promote_due(
        &self,
        max: usize,
        longest: Duration,
    ) -> Result<u64, RedisError> {
        self.promote(max, "due", Some(longest)).await
    }

    /// Moves up to `max` retries back into the stream whether due or not,
    /// oldest due first: for a queue being emptied (a destination deleted,
    /// its webhooks dead-lettered), where no retry may wait out its time.
    /// Returns how many moved.
    pub(crate) async fn promote_all(&self, max: usize) -> Result<u64, RedisError> {
        self.promote(max, "all", None).await
    }

    async fn promote(
        &self,
        max: usize,
        which: &str,
        longest: Option<Duration>,
    ) -> Result<u64, RedisError> {
        let mut conn = self.conn.upkeep.clone();
        let mut call = DUE.prepare_invoke();
        call.key(self.stream_key())
            .key(self.retries_key())
            .key(self.statuses_key())
            .arg(max.max(1))
            .arg(which);
        if let Some(longest) = longest {
            call.arg(u64::try_from(longest.as_millis()).unwrap_or(u64::MAX));
        }
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        count(&v)
    }
}
