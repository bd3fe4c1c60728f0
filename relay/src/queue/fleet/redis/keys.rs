//! [`RedisKeys`]: a fleet's idempotency keys, each naming one request
//! whatever queue it went to.

use std::time::Duration;

use redis::{Script, Value};

use dripfeed::global::{RedisConnection, RedisError};

use super::{CALL, array, bounded, count, text};

/// The script, made once and shared by every instance (it holds its Lua
/// source: one copy per instance would cost kilobytes each).
static KEYS: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/keys.lua")));

/// What [`RedisKeys::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum KeyClaim {
    /// A new key, now claimed for the id given (pending): admit its job
    /// under that id, then [`accept`](RedisKeys::accept) it (or
    /// [`release`](RedisKeys::release) it if the job was refused).
    New,
    /// The same request was admitted before as this id.
    Repeat(String),
    /// The same request is being admitted as this id, or was and its
    /// admission's end was never recorded (its node died between the two):
    /// admit it under this id with [`RedisQueue::admit_fresh`], which tells
    /// which.
    ///
    /// [`RedisQueue::admit_fresh`]: super::queue::RedisQueue::admit_fresh
    Pending(String),
    /// The key was used for another request (the id it names).
    Conflict(String),
}

/// A fleet's idempotency keys in Redis: each key names one request (the
/// caller's text for it: its destination and a hash of its body, say) and
/// the id its job was admitted as, for `remember`. Each key is one Redis
/// key (`dripfeed:k:NAME:KEY`), so the keys of a fleet spread over a
/// Redis Cluster's slots, and a key is the same whichever queue (and slot)
/// its job goes to: the same key for another destination is a conflict,
/// not a second job.
///
/// A keyed admission is three round trips: [`claim`](Self::claim), the
/// queue's [`admit_fresh`](super::queue::RedisQueue::admit_fresh), then
/// [`accept`](Self::accept) (or [`release`](Self::release) when the queue
/// refused). A node that dies between the admission and the accept leaves
/// the key pending under its id: a retry finds it
/// ([`KeyClaim::Pending`]) and admits under the same id, which the queue
/// answers as seen if the first got in. Keys are the caller's to scope (by
/// tenant, say) and to encode so that no two scopes' keys collide.
#[derive(Clone)]
pub(crate) struct RedisKeys {
    conn: RedisConnection,
    prefix: String,
    script: &'static Script,
}

impl std::fmt::Debug for RedisKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisKeys")
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisKeys {
    /// The keys of `name` (Redis keys `dripfeed:k:NAME:KEY`), through
    /// `conn`; round trips counted as `keys`.
    pub(crate) fn new(conn: RedisConnection, name: &str) -> RedisKeys {
        RedisKeys {
            conn: conn.counted_as("keys"),
            prefix: format!("dripfeed:k:{name}:"),
            script: &KEYS,
        }
    }

    /// The Redis key that holds `key`.
    pub(crate) fn key_of(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    async fn call(&self, key: &str, args: &[&str]) -> Result<Value, RedisError> {
        let mut conn = self.conn.clone();
        let mut call = self.script.prepare_invoke();
        call.key(self.key_of(key));
        for a in args {
            call.arg(*a);
        }
        bounded(call.invoke_async(&mut conn), CALL).await
    }

    /// Looks `key` up for `request`; a new key is claimed for `id`
    /// (pending, remembered for `remember`). One round trip.
    pub(crate) async fn claim(
        &self,
        key: &str,
        request: &str,
        id: &str,
        remember: Duration,
    ) -> Result<KeyClaim, RedisError> {
        let ttl = ms(remember).to_string();
        let answer = self.call(key, &["claim", request, id, &ttl]).await?;
        let items = array(answer, 2, "keys claim")?;
        let id = text(&items[1]).unwrap_or_default();
        Ok(match text(&items[0]).as_deref() {
            Some("new") => KeyClaim::New,
            Some("repeat") => KeyClaim::Repeat(id),
            Some("pending") => KeyClaim::Pending(id),
            Some("conflict") => KeyClaim::Conflict(id),
            _ => return Err(RedisError::unexpected("keys claim")),
        })
    }

    /// `key`'s job was admitted as `id`: remembered for `remember` from
    /// now. Whether the key was still pending for `id`. One round trip.
    pub(crate) async fn accept(
        &self,
        key: &str,
        id: &str,
        remember: Duration,
    ) -> Result<bool, RedisError> {
        let ttl = ms(remember).to_string();
        let answer = self.call(key, &["accept", id, &ttl]).await?;
        Ok(count(&answer)? == 1)
    }

    /// `key`'s job (`id`) was refused: the key is forgotten, so a retry
    /// may try again. Whether it was still pending for `id`. One round
    /// trip.
    pub(crate) async fn release(&self, key: &str, id: &str) -> Result<bool, RedisError> {
        let answer = self.call(key, &["release", id]).await?;
        Ok(count(&answer)? == 1)
    }
}
