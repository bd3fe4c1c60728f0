//! [`RedisMap`]: a map of settings a fleet shares, with a version every
//! node polls to learn of a change in one cheap round trip, and a log of
//! which name each version changed, so a node reads only what changed
//! since the version it applied.

use redis::{Script, Value};

use dripfeed::global::{RedisConnection, RedisError};

use super::{array, bounded, count, text};

use super::CALL;

/// Sets a field and bumps the version, in one step; the log names the
/// field at the new version.
#[cfg(test)]
const SET: &str = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                   local v = redis.call('INCR', KEYS[2]) \
                   redis.call('ZADD', KEYS[3], v, ARGV[1]) \
                   return v";

/// Sets a field only if it holds what the caller last read (`ARGV[3]` `-`:
/// absent; `=`: `ARGV[4]`) and, when `ARGV[5]` names another field, that
/// one too (`ARGV[6]`, `ARGV[7]` alike), bumping the version; false when
/// either did not.
const SET_IF: &str = "local cur = redis.call('HGET', KEYS[1], ARGV[1]) \
                      if (ARGV[3] == '-' and cur) or (ARGV[3] == '=' and cur ~= ARGV[4]) then \
                        return false end \
                      if ARGV[5] then \
                        local g = redis.call('HGET', KEYS[1], ARGV[5]) \
                        if (ARGV[6] == '-' and g) or (ARGV[6] == '=' and g ~= ARGV[7]) then \
                          return false end \
                      end \
                      redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                      local v = redis.call('INCR', KEYS[2]) \
                      redis.call('ZADD', KEYS[3], v, ARGV[1]) \
                      return v";

/// The version and the fields changed after version `ARGV[1]`, read at one
/// instant: `{v, 1, {name, value, ...}}`, or `{v, 0}` when the log cannot
/// say (more than `ARGV[2]` changes, or fewer logged names than versions:
/// a name changed twice, or a change by a node that keeps no log).
const SINCE: &str = "local v = tonumber(redis.call('GET', KEYS[2]) or '0') \
                     local seen = tonumber(ARGV[1]) \
                     if v <= seen then return {v, 1, {}} end \
                     if v - seen > tonumber(ARGV[2]) then return {v, 0} end \
                     local names = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf') \
                     if #names ~= v - seen then return {v, 0} end \
                     local out = {} \
                     for _, n in ipairs(names) do \
                       local val = redis.call('HGET', KEYS[1], n) \
                       if val then out[#out + 1] = n out[#out + 1] = val end \
                     end \
                     return {v, 1, out}";

/// Entries one page of a whole read asks for.
const PAGE: u64 = 1000;

/// The most changes read from the log at once; past it, the whole map.
const SINCE_MOST: u64 = 1024;

/// The scripts, one copy for every map.
static SET_IF_SCRIPT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(SET_IF));
static SINCE_SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(SINCE));

/// A map of names to values kept in one Redis hash and shared by a fleet
/// (e.g. the destinations an admin API changed at run time), with a
/// version bumped by every change in the same step.
///
/// Each node polls [`version`](Self::version) (one `GET`) and, when it
/// moved, reads what changed since the version it applied
/// ([`since`](Self::since): O(log n + changes), the log being a sorted set
/// of each name at the version that last changed it), or every entry when
/// the log cannot say ([`entries`](Self::entries)); a change reaches every
/// node within one poll interval at a round trip per interval. The hash,
/// the version and the log are hash-tagged by the map's name: one Redis
/// Cluster slot.
/// A value is the caller's to encode (a deletion the fleet must remember is
/// a value too, e.g. a tombstone).
#[derive(Clone)]
pub(crate) struct RedisMap {
    conn: RedisConnection,
    hash: String,
    version: String,
    log: String,
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
            log: format!("{hash}:log"),
            hash,
        }
    }

    /// `script` with the keys of a change or a read of the changes: the
    /// hash, the version and the log of which entry each version changed.
    fn logged<'a>(&self, script: &'a Script) -> redis::ScriptInvocation<'a> {
        let mut call = script.prepare_invoke();
        call.key(&self.hash).key(&self.version).key(&self.log);
        call
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
        let mut call = self.logged(&set);
        call.arg(name).arg(value);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        count(&v)
    }

    /// Sets `name` to `value` only if it still holds `expected` (`None`:
    /// absent), as the caller last read it: a compare-and-set, so two nodes
    /// changing one name at once cannot undo each other unseen. Returns
    /// the version after the change, or `None` when `name` held something
    /// else (nothing changed). With a `guard`, only if the field it names still holds what it says
    /// too (`None`: absent): a change that depends on another entry (an
    /// endpoint on its application) is not written once that entry changed.
    pub(crate) async fn set_if(
        &self,
        name: &str,
        value: &str,
        expected: Option<&str>,
        guard: Option<(&str, Option<&str>)>,
    ) -> Result<Option<u64>, RedisError> {
        let mut conn = self.conn.clone();
        let mut call = self.logged(&SET_IF_SCRIPT);
        call.arg(name).arg(value);
        fn held(held: Option<&str>) -> (&str, &str) {
            match held {
                None => ("-", ""),
                Some(v) => ("=", v),
            }
        }
        let (mode, value) = held(expected);
        call.arg(mode).arg(value);
        if let Some((field, expected)) = guard {
            let (mode, value) = held(expected);
            call.arg(field).arg(mode).arg(value);
        }
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
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
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

    /// The version and every entry (name, value) as of that version.
    /// Read in pages ([`PAGE`] entries to an `HSCAN`, each well within a
    /// command's timeout, where one read of a map of 100,000 entries
    /// would not be), then the entries changed while the pages were read
    /// from the log ([`since`](Self::since)) over them. A map changing too
    /// fast for the log to say (a name changed twice during the read)
    /// three times running is answered as of the version before the last
    /// read: each entry as it was at some moment of the read, so the next
    /// read of the changes since that version brings every one up to date
    /// (nothing is ever deleted from the map, an entry only rewritten).
    pub(crate) async fn entries(&self) -> Result<(u64, Vec<(String, String)>), RedisError> {
        let mut tries = 0;
        loop {
            let from = self.version().await?;
            let mut all = self.pages().await?;
            let version = match self.since(from).await? {
                (version, Some(changed)) => {
                    all.extend(changed);
                    version
                }
                _ if tries < 2 => {
                    tries += 1;
                    continue;
                }
                _ => from,
            };
            let mut all: Vec<_> = all.into_iter().collect();
            all.sort();
            return Ok((version, all));
        }
    }

    /// Every entry, read a page at a time (an entry changed meanwhile may
    /// be read as it was or as it is).
    async fn pages(&self) -> Result<std::collections::HashMap<String, String>, RedisError> {
        let mut conn = self.conn.clone();
        let mut all = std::collections::HashMap::new();
        let mut cursor = "0".to_owned();
        loop {
            let mut cmd = redis::cmd("HSCAN");
            cmd.arg(&self.hash).arg(&cursor).arg("COUNT").arg(PAGE);
            let v: Value = bounded(cmd.query_async(&mut conn), CALL).await?;
            let mut parts = array(v, 2, "a page of the map")?.into_iter();
            cursor = parts
                .next()
                .as_ref()
                .and_then(text)
                .ok_or_else(|| RedisError::unexpected("the map's cursor"))?;
            let fields = array(parts.next().unwrap_or(Value::Nil), 0, "the page's fields")?;
            all.extend(pairs(&fields)?);
            if cursor == "0" {
                return Ok(all);
            }
        }
    }

    /// The version and the entries changed after version `seen`, read at
    /// one instant; `None` in place of the entries when the log cannot
    /// say which (read them all with [`entries`](Self::entries)).
    pub(crate) async fn since(
        &self,
        seen: u64,
    ) -> Result<(u64, Option<Vec<(String, String)>>), RedisError> {
        let mut conn = self.conn.clone();
        let mut call = self.logged(&SINCE_SCRIPT);
        call.arg(seen).arg(SINCE_MOST);
        let v: Value = bounded(call.invoke_async(&mut conn), CALL).await?;
        let mut parts = array(v, 2, "the version and the changes")?.into_iter();
        let version = parts.next().map_or(Ok(0), |v| count(&v))?;
        let known = parts.next().map_or(Ok(0), |v| count(&v))? == 1;
        if !known {
            return Ok((version, None));
        }
        let fields = array(parts.next().unwrap_or(Value::Nil), 0, "the changes")?;
        Ok((version, Some(pairs(&fields)?)))
    }
}

/// `[name, value, ...]` as pairs, sorted by name.
fn pairs(fields: &[Value]) -> Result<Vec<(String, String)>, RedisError> {
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
    Ok(all)
}
