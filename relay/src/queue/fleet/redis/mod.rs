//! The fleet's queue in Redis: what only this engine keeps there, over
//! the library's [`RedisConnection`](dripfeed::global::RedisConnection).
//!
//! - [`queue::RedisQueue`]: one destination's leaky-bucket queue in a
//!   Redis stream shared by the fleet (admission bounded fleet-wide,
//!   claims, retries, a dead node's work reclaimed), with each job's
//!   status ([`queue_status`]) and its dead letters ([`queue_dead`]);
//! - [`keys::RedisKeys`]: idempotency keys the fleet shares, each naming
//!   one request;
//! - [`map::RedisMap`]: settings the fleet shares (the destinations the
//!   admin API changed), with a version each relay polls;
//! - [`events::RedisEvents`]: applications' events, their copies' ends
//!   and attempts;
//! - [`persistence`]: what the Redis keeps of what it acknowledged.
//!
//! Each script touches the keys of one destination (or one application's
//! events), hash-tagged by it: one Redis Cluster slot.

pub(crate) mod breaker;
pub(crate) mod events;
pub(crate) mod keys;
pub(crate) mod map;
pub(crate) mod persistence;
pub(crate) mod queue;
mod queue_claims;
pub(crate) mod queue_dead;
pub(crate) mod queue_status;
#[cfg(test)]
mod tests;
pub(crate) mod wake_stream;

use std::future::Future;
use std::time::Duration;

use dripfeed::global::RedisError;
use redis::Value;

/// How long one call may take.
pub(crate) const CALL: Duration = Duration::from_secs(2);

/// A value Redis sent as bytes.
pub(crate) fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// A value Redis sent as text.
pub(crate) fn text(v: &Value) -> Option<String> {
    String::from_utf8(bytes(v)?).ok()
}

/// A count Redis sent as an integer or as text.
pub(crate) fn count(v: &Value) -> Result<u64, RedisError> {
    match v {
        Value::Int(i) => u64::try_from(*i).map_err(|_| RedisError::unexpected("negative count")),
        other => text(other)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| RedisError::unexpected("a count")),
    }
}

/// The array a script returned, at least `len` long.
pub(crate) fn array(v: Value, len: usize, what: &str) -> Result<Vec<Value>, RedisError> {
    match v {
        Value::Array(items) if items.len() >= len => Ok(items),
        _ => Err(RedisError::unexpected(what)),
    }
}

/// Runs `fut` with a deadline; a late answer is a failure.
pub(crate) async fn bounded<T>(
    fut: impl Future<Output = Result<T, redis::RedisError>>,
    limit: Duration,
) -> Result<T, RedisError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(RedisError::from),
        Err(_) => Err(RedisError::timeout()),
    }
}
