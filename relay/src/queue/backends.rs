//! The one place that opens what needs Redis or PostgreSQL (features
//! `redis` and `postgres`): the fleet's queue, the fleet's permits for a
//! relay of the local engine (`global_rate`), and tenant quotas shared in
//! Redis or PostgreSQL. A build without a backend answers why it cannot.

use std::sync::Arc;

use dripfeed::PermitSource;
use dripfeed::global::Failure;
use dripfeed::keyed::{BucketStore, Quota};

use super::stores::StoreCheck;
use crate::config::Settings;

/// A shared store and the check `/readyz` makes of it.
pub(crate) type Shared = (Arc<dyn BucketStore>, Option<StoreCheck>);

/// The fleet's permits, if `redis` is set: every destination of every
/// relay of the local engine draws from one bucket, so the fleet delivers
/// at `global_rate` in all, exactly.
pub(crate) async fn fleet_permits(s: &Settings) -> Result<Option<Arc<dyn PermitSource>>, String> {
    let Some(url) = &s.redis else {
        return Ok(None);
    };
    let rate = s.global_rate.unwrap_or(s.drain_rate);
    #[cfg(feature = "redis")]
    {
        use dripfeed::global::RedisRate;
        let conn = super::fleet::link::connect(url.as_str()).await?;
        let fleet = RedisRate::builder(conn, "webhook_relay", rate)
            .name("webhook_relay")
            .on_failure(s.redis_failure.failure(s.fleet_size))
            .start()
            .map_err(|e| format!("fleet limit: {e}"))?;
        Ok(Some(Arc::new(fleet)))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (url, rate);
        Err("redis: this build has no Redis (feature redis)".into())
    }
}

/// Tenant quotas in PostgreSQL, table `dripfeed_tenants`.
pub(crate) async fn quotas_in_postgres(
    url: &str,
    quota: Quota,
    failure: Failure,
) -> Result<Shared, String> {
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
        let buckets = Arc::new(buckets);
        let probe = buckets.clone();
        let check = StoreCheck::new("postgres", buckets.clone(), move || probe.in_fallback());
        Ok((buckets, Some(check)))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, quota, failure);
        Err("postgres: this build has no PostgreSQL (feature postgres)".into())
    }
}

/// Tenant quotas in Redis, keys `{webhook_relay_tenants:…}`.
pub(crate) async fn quotas_in_redis(
    url: &str,
    quota: Quota,
    failure: Failure,
) -> Result<Shared, String> {
    #[cfg(feature = "redis")]
    {
        use dripfeed::global::RedisBuckets;
        let conn = super::fleet::link::connect(url).await?;
        let buckets = RedisBuckets::new(conn, "webhook_relay_tenants", quota)
            .on_failure(failure)
            .map_err(|e| format!("redis: {e}"))?;
        let buckets = Arc::new(buckets);
        let probe = buckets.clone();
        let check = StoreCheck::new("redis", buckets.clone(), move || probe.in_fallback());
        Ok((buckets, Some(check)))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (url, quota, failure);
        Err("redis: this build has no Redis (feature redis)".into())
    }
}

/// The fleet's destination changes as read at start (`queue = redis`),
/// and its Redis's durability, checked.
pub(crate) struct FleetStart {
    #[cfg(feature = "redis")]
    start: super::fleet::changes::Start,
    #[cfg(feature = "redis")]
    durability: Arc<super::fleet::durability::Watch>,
}

/// Why a fleet relay does not start.
pub(crate) enum StartError {
    /// The setting `key` refuses it (exit 2).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Refused {
        /// The setting.
        key: &'static str,
        /// Why.
        why: String,
    },
    /// Something failed (exit 1).
    Failed(String),
}

/// Checks that the fleet's Redis keeps what it acknowledges
/// (`redis_durability`), then reads the fleet's destination changes and
/// applies them over `cfg`'s destinations, as the registry is read in the
/// local engine.
pub(crate) async fn fleet_start(cfg: &mut crate::config::Config) -> Result<FleetStart, StartError> {
    #[cfg(feature = "redis")]
    {
        let s = &cfg.settings;
        let url = s.redis.as_ref().map(|u| u.as_str().to_owned());
        let conn = super::fleet::link::connect(url.as_deref().unwrap_or_default())
            .await
            .map_err(StartError::Failed)?;
        super::fleet::durability::through_failover(
            url.as_deref().unwrap_or_default(),
            s.redis_wait_replicas,
        );
        let durability = super::fleet::durability::Watch::start(conn, s.redis_durability)
            .await
            .map_err(|why| StartError::Refused {
                key: "redis_durability",
                why,
            })?;
        let start = super::fleet::changes::read_at_start(cfg)
            .await
            .map_err(StartError::Failed)?;
        Ok(FleetStart { start, durability })
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = cfg;
        Err(StartError::Failed(
            "queue = redis: this build has no Redis (feature redis)".into(),
        ))
    }
}

/// What the fleet's engine is opened with, besides the configuration.
pub(crate) struct FleetParts {
    /// The destinations in force.
    pub catalog: Arc<crate::catalog::Catalog>,
    /// Each destination's deliveries, by name.
    pub deliveries: Arc<crate::deliver::deliveries::Deliveries>,
    /// Where deliveries may connect.
    pub guard: Arc<crate::deliver::guard::AddressGuard>,
    /// The tenant quota store, if tenants have quotas.
    pub quotas: Option<Arc<dyn BucketStore>>,
    /// The shared tenant quota store's check, if any.
    pub stores: Vec<StoreCheck>,
}

/// The fleet's engine (`queue = redis`), its drains started.
pub(crate) async fn open_fleet(
    cfg: &crate::config::Config,
    start: FleetStart,
    parts: FleetParts,
) -> Result<Arc<dyn super::Queue>, String> {
    #[cfg(feature = "redis")]
    {
        let parts = super::fleet::open::Parts {
            start: start.start,
            catalog: parts.catalog,
            deliveries: parts.deliveries,
            guard: parts.guard,
            quotas: parts.quotas,
            stores: parts.stores,
            durability: start.durability,
        };
        let q: Arc<dyn super::Queue> = super::fleet::open::open(cfg, parts).await?;
        Ok(q)
    }
    #[cfg(not(feature = "redis"))]
    {
        let FleetParts {
            catalog,
            deliveries,
            guard,
            quotas,
            stores,
        } = parts;
        let _ = (cfg, start, catalog, deliveries, guard, quotas, stores);
        Err("queue = redis: this build has no Redis (feature redis)".into())
    }
}
