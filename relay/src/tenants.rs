//! Where the tenant quotas live (`--tenant-rate` / `--tenant-burst`): in
//! this relay's memory by default, or in a store every relay shares —
//! `--postgres URL` (one table) or else `--redis URL` (one hash per
//! tenant, on a server or a cluster). Either is a `BucketStore`, handed to
//! the throttle with `key_store`; the throttle charges the tenant, refunds
//! the charge when the queue refuses, and answers 503 (never 429) while the
//! store is down and failing closed. Built without the crate feature a
//! store needs, its flag is refused with a hint.

use std::sync::Arc;

use dripfeed::global::Failure;
use dripfeed::keyed::{BucketStore, Quota};

/// Tenant quotas in PostgreSQL (`--postgres URL`), table `dripfeed_tenants`.
pub async fn open_postgres(
    url: &str,
    quota: Quota,
    failure: Failure,
) -> Result<Arc<dyn BucketStore>, String> {
    #[cfg(feature = "postgres")]
    {
        use dripfeed::global::PgBuckets;
        let pool = PgBuckets::pool(url, 8).map_err(|e| format!("--postgres: {e}"))?;
        let buckets = PgBuckets::new(pool, "dripfeed_tenants", quota)
            .map_err(|e| format!("--postgres: {e}"))?
            .on_failure(failure)
            .map_err(|e| format!("--postgres: {e}"))?;
        buckets
            .migrate()
            .await
            .map_err(|e| format!("--postgres: {e}"))?;
        Ok(Arc::new(buckets))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, quota, failure);
        Err("--postgres needs the postgres feature: cargo run --features postgres --example webhook_relay".into())
    }
}

/// Tenant quotas in Redis (`--redis URL`), keys `{webhook_relay_tenants:…}`.
pub fn open_redis(
    url: &str,
    quota: Quota,
    failure: Failure,
) -> Result<Arc<dyn BucketStore>, String> {
    #[cfg(feature = "redis")]
    {
        use dripfeed::global::{RedisBuckets, RedisConnection};
        let conn = RedisConnection::open(url).map_err(|e| format!("--redis: {e}"))?;
        let buckets = RedisBuckets::new(conn, "webhook_relay_tenants", quota)
            .on_failure(failure)
            .map_err(|e| format!("--redis: {e}"))?;
        Ok(Arc::new(buckets))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (url, quota, failure);
        Err(
            "--redis needs the redis feature: cargo run --features redis --example webhook_relay"
                .into(),
        )
    }
}
