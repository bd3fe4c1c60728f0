//! Where the tenant quotas live (`tenant_rate` / `tenant_burst`): in this
//! relay's memory by default, or in a store every relay shares —
//! `postgres` (one table) or else `redis` (one hash per tenant, on a server
//! or a cluster). Either way one `BucketStore` serves every destination (a
//! table per destination would forget a tenant whenever it went idle): the
//! set charges the tenant, gives the charge back when the queue refuses,
//! and answers 503 (never 429) while a store is down and failing closed.
//!
//! With `[[tenants]]`, a tenant's own `rate` / `burst` override the global
//! ones: set in the store at start ([`set_overrides`]). Without
//! `tenant_rate`, a tenant without a rate of its own is not limited (intake
//! does not charge it), so the store exists only when some tenant has a rate.

use std::sync::Arc;

use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};

use super::stores::StoreCheck;
use crate::config::{Config, Settings, Tenant};

/// Tenants a relay's own table holds at once (the idlest go first).
pub(crate) const LOCAL_TENANTS: usize = 10_000;

/// Bytes the relay's own table may hold, names included: reserved in the
/// byte budget at start (its buckets come and go with traffic, but never
/// past this).
pub(crate) const LOCAL_TABLE_BYTES: u64 =
    LOCAL_TENANTS as u64 * (crate::domain::names::MAX_NAME_BYTES as u64 + 128);

/// Whether the configuration keeps tenant quotas in this relay's memory.
pub(crate) fn local(cfg: &Config) -> bool {
    let s = &cfg.settings;
    cfg.tenant_quotas() && s.postgres.is_none() && s.redis.is_none()
}

/// A tenant's own quota, if it has a rate or burst of its own: its rate
/// (else `tenant_rate`) and its burst (else `tenant_burst`).
fn own_quota(t: &Tenant, s: &Settings) -> Result<Option<Quota>, String> {
    if t.rate.is_none() && t.burst.is_none() {
        return Ok(None);
    }
    let Some(rate) = t.rate.or(s.tenant_rate) else {
        return Ok(None); // refused by the configuration's checks
    };
    Quota::per_second(rate)
        .burst(t.burst.unwrap_or(s.tenant_burst))
        .map(Some)
        .map_err(|e| format!("tenant {}: {e}", t.name))
}

/// [`set_overrides`] now; a store that does not answer (Redis or
/// PostgreSQL down at start) gets them once it does, tried again every few
/// seconds in the background: the relay starts meanwhile, its tenants
/// charged by the store's failure mode.
pub(crate) async fn set_overrides_when_up(store: Arc<dyn BucketStore>, cfg: &Config) {
    let Err(e) = set_overrides(store.as_ref(), cfg).await else {
        return;
    };
    tracing::warn!(error = %e, "tenants' own quotas cannot be written to their store now: they apply once it answers");
    let cfg = cfg.clone();
    tokio::spawn(async move {
        let mut wait = std::time::Duration::from_millis(500);
        loop {
            tokio::time::sleep(wait).await;
            match set_overrides(store.as_ref(), &cfg).await {
                Ok(()) => {
                    tracing::info!("tenants' own quotas written to their store");
                    return;
                }
                Err(_) => wait = (wait * 2).min(std::time::Duration::from_secs(5)),
            }
        }
    });
}

/// The tenant quota store the configuration asks for, with the check
/// `/readyz` makes of it when it is shared (Redis, PostgreSQL); `None` when
/// no tenant has a quota (no `tenant_rate`, no tenant's own rate).
pub(crate) async fn open(
    cfg: &Config,
) -> Result<Option<(Arc<dyn BucketStore>, Option<StoreCheck>)>, String> {
    let s = &cfg.settings;
    let quota = match s.tenant_rate {
        Some(rate) => Quota::per_second(rate)
            .burst(s.tenant_burst)
            .map_err(|e| format!("tenant quota: {e}"))?,
        // Only tenants with their own rate are charged: each has an
        // override, so the default is never used; it is the first of them.
        None => match cfg.tenants.iter().find(|t| t.rate.is_some()) {
            Some(t) => own_quota(t, s)?.ok_or("tenant quota: no rate")?,
            None => return Ok(None),
        },
    };
    let store = match (&s.postgres, &s.redis) {
        (Some(url), _) => {
            let failure = s.postgres_failure.failure(s.fleet_size);
            super::backends::quotas_in_postgres(url.as_str(), quota, failure).await?
        }
        (None, Some(url)) => {
            let failure = s.redis_failure.failure(s.fleet_size);
            super::backends::quotas_in_redis(url.as_str(), quota, failure).await?
        }
        (None, None) => {
            let table = KeyedBuckets::<String>::new(LOCAL_TENANTS, quota)
                .map_err(|e| format!("tenant quota: {e}"))?;
            (Arc::new(table) as Arc<dyn BucketStore>, None)
        }
    };
    Ok(Some(store))
}

/// Sets each configured tenant's own quota in `store`, and puts every
/// other tenant back on the default (a shared store may remember an
/// override an earlier configuration set).
pub(crate) async fn set_overrides(store: &dyn BucketStore, cfg: &Config) -> Result<(), String> {
    for t in &cfg.tenants {
        let done = match own_quota(t, &cfg.settings)? {
            Some(q) => store.set_quota(&t.name, q).await,
            None => store.clear_quota(&t.name).await.map(|_| ()),
        };
        done.map_err(|e| format!("tenant {}'s quota: {e}", t.name))?;
    }
    Ok(())
}
