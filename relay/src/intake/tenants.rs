//! Where the tenant quotas live (`tenant_rate` / `tenant_burst`): in this
//! relay's memory by default, or in a store every relay shares —
//! `postgres` (one table) or else `redis` (one hash per tenant, on a server
//! or a cluster). Either way one `BucketStore` serves every destination (a
//! table per destination would forget a tenant whenever it went idle): the
//! set charges the tenant, gives the charge back when the queue refuses,
//! and answers 503 (never 429) while a store is down and failing closed.

use std::sync::Arc;

use dripfeed::global::Failure;
use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};

use crate::config::Settings;

/// Tenants a relay's own table holds at once (the idlest go first).
pub const LOCAL_TENANTS: usize = 10_000;

/// Bytes the relay's own table may hold, names included: reserved in the
/// byte budget at start (its buckets come and go with traffic, but never
/// past this).
pub const LOCAL_TABLE_BYTES: u64 =
    LOCAL_TENANTS as u64 * (super::names::MAX_NAME_BYTES as u64 + 128);

/// Whether the settings keep tenant quotas in this relay's memory.
pub fn local(s: &Settings) -> bool {
    s.tenant_rate.is_some() && s.postgres.is_none() && s.redis.is_none()
}

/// The tenant quota store the settings ask for; `None` without `tenant_rate`.
pub async fn open(s: &Settings) -> Result<Option<Arc<dyn BucketStore>>, String> {
    let Some(rate) = s.tenant_rate else {
        return Ok(None);
    };
    let quota = Quota::per_second(rate)
        .burst(s.tenant_burst)
        .map_err(|e| format!("tenant quota: {e}"))?;
    let store = match (&s.postgres, &s.redis) {
        (Some(url), _) => {
            let failure = s.postgres_failure.failure(s.fleet_size);
            open_postgres(url.as_str(), quota, failure).await?
        }
        (None, Some(url)) => {
            open_redis(url.as_str(), quota, s.redis_failure.failure(s.fleet_size))?
        }
        (None, None) => {
            let table = KeyedBuckets::<String>::new(LOCAL_TENANTS, quota)
                .map_err(|e| format!("tenant quota: {e}"))?;
            Arc::new(table)
        }
    };
    Ok(Some(store))
}

/// Tenant quotas in PostgreSQL, table `dripfeed_tenants`.
async fn open_postgres(
    url: &str,
    quota: Quota,
    failure: Failure,
) -> Result<Arc<dyn BucketStore>, String> {
    #[cfg(feature = "postgres")]
    {
        use dripfeed::global::PgBuckets;
        let pool = PgBuckets::pool(url, 8).map_err(|e| format!("postgres: {e}"))?;
        let buckets = PgBuckets::new(pool, "dripfeed_tenants", quota)
            .map_err(|e| format!("postgres: {e}"))?
            .on_failure(failure)
            .map_err(|e| format!("postgres: {e}"))?;
        buckets
            .migrate()
            .await
            .map_err(|e| format!("postgres: {e}"))?;
        Ok(Arc::new(buckets))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, quota, failure);
        Err("postgres: this build has no PostgreSQL (feature postgres)".into())
    }
}

/// Tenant quotas in Redis, keys `{webhook_relay_tenants:…}`.
fn open_redis(url: &str, quota: Quota, failure: Failure) -> Result<Arc<dyn BucketStore>, String> {
    #[cfg(feature = "redis")]
    {
        use dripfeed::global::{RedisBuckets, RedisConnection};
        let conn = RedisConnection::open(url).map_err(|e| format!("redis: {e}"))?;
        let buckets = RedisBuckets::new(conn, "webhook_relay_tenants", quota)
            .on_failure(failure)
            .map_err(|e| format!("redis: {e}"))?;
        Ok(Arc::new(buckets))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (url, quota, failure);
        Err("redis: this build has no Redis (feature redis)".into())
    }
}
