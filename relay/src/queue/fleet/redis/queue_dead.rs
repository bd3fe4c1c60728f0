//! A shared queue's dead letters kept in Redis
//! ([`RedisQueue::with_dead_letters`]): read from any node, a page at a
//! time, and put back into the queue with their ids.

use redis::Value;

use dripfeed::global::RedisError;

use super::queue::RedisQueue;
use super::{CALL, array, bounded, bytes, count, text};

/// One dead letter of a shared queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadLetter {
    /// Its entry in the dead letters' stream: where a reader goes on from,
    /// and what [`RedisQueue::redrive`] takes.
    pub entry: String,
    /// The job's id.
    pub id: String,
    /// Why it was dead-lettered.
    pub reason: String,
    /// Attempts made.
    pub attempts: u32,
    /// The receiver's last status code, if it answered one.
    pub last_status: Option<u16>,
    /// The last attempt's error, if the consumer noted one
    /// ([`Ending::with_error`](super::queue_status::Ending::with_error)).
    pub error: Option<String>,
    /// The job's bytes.
    pub job: Vec<u8>,
}

/// A dead letter from an `XRANGE` entry: `[id, [field, value, …]]`.
fn letter(entry: Value) -> Option<DeadLetter> {
    let Value::Array(mut parts) = entry else {
        return None;
    };
    let Some(Value::Array(fields)) = parts.pop() else {
        return None;
    };
    let mut d = DeadLetter {
        entry: text(parts.first()?)?,
        id: String::new(),
        reason: String::new(),
        attempts: 0,
        last_status: None,
        error: None,
        job: Vec::new(),
    };
    for pair in fields.chunks(2) {
        let [k, v] = pair else { continue };
        match text(k).as_deref() {
            Some("id") => d.id = text(v).unwrap_or_default(),
            Some("reason") => d.reason = text(v).unwrap_or_default(),
            Some("n") => d.attempts = text(v).and_then(|n| n.parse().ok()).unwrap_or(0),
            Some("last") => d.last_status = text(v).and_then(|s| s.parse().ok()),
            Some("error") => d.error = text(v).filter(|e| !e.is_empty()),
            Some("job") => d.job = bytes(v).unwrap_or_default(),
            _ => {}
        }
    }
    Some(d)
}

impl RedisQueue {
    /// Up to `count` dead letters after the entry `after` (`None`: from the
    /// oldest), oldest first; one round trip, counted as
    /// `queue_dead_letters`.
    pub(crate) async fn dead_letters(
        &self,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<DeadLetter>, RedisError> {
        let mut conn = self.conn.dead.clone();
        let mut range = redis::cmd("XRANGE");
        range
            .arg(self.dead_key())
            .arg(after.map_or_else(|| "-".to_owned(), |a| format!("({a}")))
            .arg("+")
            .arg("COUNT")
            .arg(count.max(1));
        let reply: Value = bounded(range.query_async(&mut conn), CALL).await?;
        let Value::Array(entries) = reply else {
            return Ok(Vec::new());
        };
        Ok(entries.into_iter().filter_map(letter).collect())
    }

    /// Writes a dead letter of job `id` (`job`, of `owner`) that never
    /// entered the queue (a copy fanned out as its destination was
    /// deleted), for `reason`, with no attempts, once (`queue_unsent.lua`:
    /// an id with a status here, queued, delivered or dead-lettered
    /// before, gets none): listed with the destination's others, where it
    /// was only marked in its event. Whether it was written.
    pub(crate) async fn dead_letter_unsent(
        &self,
        id: &str,
        job: &[u8],
        reason: &str,
        owner: Option<&str>,
    ) -> Result<bool, RedisError> {
        let mut conn = self.conn.dead.clone();
        let mut call = self.script_with_keys(&super::queue::UNSENT);
        call.arg(id)
            .arg(reason)
            .arg(job)
            .arg(self.dead_max)
            .arg(owner.unwrap_or_default())
            .arg(if self.keep.is_some() { "1" } else { "0" });
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        Ok(count(&v)? == 1)
    }

    /// Puts the dead letters `entries` back into the queue, each with its
    /// id and no attempts counted (its status, when kept, queued again),
    /// while the queue is under `bound`; one round trip, counted as
    /// `queue_dead_letters`. Returns how many went back and how many were
    /// refused for want of room (a letter gone meanwhile, taken by another
    /// redrive, is neither).
    pub(crate) async fn redrive(
        &self,
        entries: &[String],
        bound: u64,
    ) -> Result<(u64, u64), RedisError> {
        if entries.is_empty() {
            return Ok((0, 0));
        }
        let mut conn = self.conn.dead.clone();
        let mut call = self.script_with_keys(&super::queue::REDRIVE);
        call.arg(bound)
            .arg(if self.keep.is_some() { "1" } else { "0" });
        for e in entries {
            call.arg(e);
        }
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        // Letters gone meanwhile (another redrive took them) are neither.
        let items = array(v, 3, "queue redrive")?;
        Ok((count(&items[0])?, count(&items[1])?))
    }
}
