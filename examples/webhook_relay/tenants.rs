//! Tenant quotas shared by every relay through PostgreSQL (`--postgres URL`,
//! with `--tenant-rate` / `--tenant-burst`): each tenant's reverse leaky
//! bucket lives in one table, so a fleet of relays holds one quota per
//! tenant. Built without the crate feature `postgres`, `--postgres` is
//! refused with a hint.

use std::time::Duration;

use dripfeed::headers::RateLimit;
use dripfeed::keyed::Quota;

/// Why a tenant's webhook is refused before it reaches the queue.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub enum TenantRefusal {
    /// Over its quota: the exact wait and the limit's state.
    OverQuota { wait: Duration, limit: RateLimit },
    /// The cost can never fit (not reachable with cost 1 and burst >= 1).
    Invalid,
    /// The store failed and the failure mode is fail-closed.
    Unavailable(String),
}

/// A shared per-tenant quota.
#[async_trait::async_trait]
pub trait TenantStore: Send + Sync {
    /// Charges one webhook to `tenant`, or says why not.
    async fn admit(&self, tenant: &str) -> Result<(), TenantRefusal>;
    /// Gives the charge back (the queue refused the webhook after all).
    async fn refund(&self, tenant: &str);
}

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use dripfeed::global::{BucketError, Failure, PgBuckets};
    use dripfeed::keyed::AdmitError;

    struct Pg(PgBuckets);

    #[async_trait::async_trait]
    impl TenantStore for Pg {
        async fn admit(&self, tenant: &str) -> Result<(), TenantRefusal> {
            match self.0.try_admit(tenant, 1.0).await {
                Ok(_) => Ok(()),
                Err(BucketError::Admit(AdmitError::OverQuota(over))) => {
                    let quota = self.0.quota(tenant);
                    let limit = RateLimit::new(
                        "tenant",
                        over.size().floor() as u64,
                        quota.drain_time(),
                        (over.size() - over.debt()).max(0.0).floor() as u64,
                        over.retry_after(),
                    );
                    Err(TenantRefusal::OverQuota {
                        wait: over.retry_after(),
                        limit,
                    })
                }
                Err(BucketError::Admit(_)) => Err(TenantRefusal::Invalid),
                Err(e) => Err(TenantRefusal::Unavailable(e.to_string())),
            }
        }

        async fn refund(&self, tenant: &str) {
            let _ = self.0.settle(tenant, 1.0, 0.0).await;
        }
    }

    pub async fn open(
        url: &str,
        quota: Quota,
        fail_open: bool,
    ) -> Result<std::sync::Arc<dyn TenantStore>, String> {
        let pool = PgBuckets::pool(url, 8).map_err(|e| format!("--postgres: {e}"))?;
        let mut buckets = PgBuckets::new(pool, "dripfeed_tenants", quota)
            .map_err(|e| format!("--postgres: {e}"))?;
        if fail_open {
            buckets = buckets
                .on_failure(Failure::FailOpen { local_share: 1.0 })
                .map_err(|e| format!("--postgres: {e}"))?;
        }
        buckets
            .migrate()
            .await
            .map_err(|e| format!("--postgres: {e}"))?;
        Ok(std::sync::Arc::new(Pg(buckets)))
    }
}

/// Opens the shared tenant store for `--postgres URL`.
pub async fn open_postgres(
    url: &str,
    quota: Quota,
    fail_open: bool,
) -> Result<std::sync::Arc<dyn TenantStore>, String> {
    #[cfg(feature = "postgres")]
    {
        pg::open(url, quota, fail_open).await
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, quota, fail_open);
        Err("--postgres needs the postgres feature: cargo run --features postgres --example webhook_relay".into())
    }
}
