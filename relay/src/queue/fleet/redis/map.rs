//! [`RedisMap`]: a small map of settings a fleet shares, with a version
//! every node polls to learn of a change in one cheap round trip.

use redis::{Script, Value};

use dripfeed::global::{RedisConnection, RedisError};

use super::{array, bounded, count, text};

use super::CALL;

/// Sets a field and bumps the version, in one step.
#[cfg(test)]
const SET: &str = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                   return redis.call('INCR', KEYS[2])";

/// Sets a field only if it holds what the caller last read (`ARGV[3]` `-`:
/// absent; `=`: `ARGV[4]`), bumping the version; false when it did not.
const SET_IF: &str = "local cur = redis.call('HGET', KEYS[1], ARGV[1]) \
                      if (ARGV[3] == '-' and cur) or (ARGV[3] == '=' and cur ~= ARGV[4]) then \
                        return false end \
                      redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                      return redis.call('INCR', KEYS[2])";

/// The version and every field, read at one instant.
const READ: &str = "local v = redis.call('GET', KEYS[2]) or '0' \
                    return {v, redis.call('HGETALL', KEYS[1])}";

/// A map of names to values kept in one Redis hash and shared by a fleet
/// (e.g. the destinations an admin API changed at run time), with a
/// version bumped by every change in the same step.
///
/// Each node polls [`version`](Self::version) (one `GET`) and reads
/// [`entries`](Self::entries) only when it moved, so a change reaches every
/// node within one poll interval at a round trip per interval. The hash and
/// the version are hash-tagged by the map's name: one Redis Cluster slot.
/// A value is the caller's to encode (a deletion the fleet must remember is
/// a value too, e.g. a tombstone).
#[derive(Clone)]
pub(crate) struct RedisMap {
    conn: RedisConnection,
    hash: String,
    version: String,
    set_if: Script,
    read: Script,
}

impl std::fmt::Debug for RedisMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisMap")
            .field("hash", &self.hash)
            .finish()
    }
}

impl RedisMap {
    /// The map called `name` (keys `dripfeed:map:{name}` and
    /// `dripfeed:map:{name}:v`), through `conn`.
    pub(crate) fn new(conn: RedisConnection, name: &str) -> RedisMap {
        let hash = format!("dripfeed:map:{{{name}}}");
        RedisMap {
            conn,
            version: format!("{hash}:v"),
            hash,
            set_if: Script::new(SET_IF),
            read: Script::new(READ),
        }
    }

    /// The hash's key.
    #[cfg(test)]
    pub(crate) fn key(&self) -> &str {
        &self.hash
    }

    /// Sets `name` to `value`; returns the map's version after the change.
    #[cfg(test)]
    pub(crate) async fn set(&self, name: &str, value: &str) -> Result<u64, RedisError> {
        let mut conn = self.conn.clone();
        let set = Script::new(SET);
        let mut call = set.prepare_invoke();
        call.key(&self.hash).key(&self.version).arg(name).arg(value);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        count(&v)
    }

    /// Sets `name` to `value` only if it still holds `expected` (`None`:
    /// absent), as the caller last read it: a compare-and-set, so two nodes
    /// changing one name at once cannot undo each other unseen. Returns
    /// the version after the change, or `None` when `name` held something
    /// else (nothing changed).
    pub(crate) async fn set_if(
        &self,
        name: &str,
        value: &str,
        expected: Option<&str>,
    ) -> Result<Option<u64>, RedisError> {
        let mut conn = self.conn.clone();
        let mut call = self.set_if.prepare_invoke();
        call.key(&self.hash).key(&self.version).arg(name).arg(value);
        match expected {
            None => call.arg("-").arg(""),
            Some(v) => call.arg("=").arg(v),
        };
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        match v {
            // Lua's false: Nil in RESP2, a boolean in RESP3.
            Value::Nil | Value::Boolean(false) => Ok(None),
            other => count(&other).map(Some),
        }
    }

    /// What `name` holds now, if anything.
    pub(crate) async fn get(&self, name: &str) -> Result<Option<String>, RedisError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&self.hash).arg(name);
        let v: Value = bounded(cmd.query_async(&mut conn), CALL).await?;
        match v {
            Value::Nil => Ok(None),
            other => text(&other)
                .map(Some)
                .ok_or_else(|| RedisError::unexpected("a field that is not text")),
        }
    }

    /// The Redis server's clock, ms since the Unix epoch: the one clock
    /// every node shares, for deadlines kept in the map (a node's own clock
    /// may be off).
    pub(crate) async fn server_ms(&self) -> Result<u64, RedisError> {
        let mut conn = self.conn.clone();
        let v: Value = bounded(redis::cmd("TIME").query_async(&mut conn), CALL).await?;
        let parts = array(v, 2, "the time")?;
        let secs = count(&parts[0])?;
        let micros = count(&parts[1])?;
        Ok(secs * 1000 + micros / 1000)
    }

    /// The map's version: 0 until the first change.
    pub(crate) async fn version(&self) -> Result<u64, RedisError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("GET");
        cmd.arg(&self.version);
        let v: Value = bounded(cmd.query_async(&mut conn), CALL).await?;
        match v {
            Value::Nil => Ok(0),
            other => count(&other),
        }
    }

    /// The version and every entry (name, value), read at one instant.
    pub(crate) async fn entries(&self) -> Result<(u64, Vec<(String, String)>), RedisError> {
        let mut conn = self.conn.clone();
        let mut call = self.read.prepare_invoke();
        call.key(&self.hash).key(&self.version);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let mut parts = array(v, 2, "the version and the fields")?.into_iter();
        let version = parts.next().map_or(Ok(0), |v| count(&v))?;
        let fields = array(parts.next().unwrap_or(Value::Nil), 0, "the fields")?;
        let mut all = Vec::with_capacity(fields.len() / 2);
        for pair in fields.chunks(2) {
            if let [k, v] = pair {
                let (Some(k), Some(v)) = (text(k), text(v)) else {
                    return Err(RedisError::unexpected("a field that is not text"));
                };
                all.push((k, v));
            }
        }
        all.sort();
        Ok((version, all))
    }
}
