//! What a shared bucket store (`RedisBuckets`, `PgBuckets`) does while it
//! cannot reach its server: the [`Failure`] mode, the in-memory buckets of
//! fail-open, and the store's health (errors counted, the fallback gauge, a
//! pause between probes). One copy for both stores, so they fail alike.

use std::future::Future;
use std::time::Duration;

use super::Failure;
use super::store_health::StoreHealth;
use crate::keyed::{BucketError, KeyedBuckets, Quota, QuotaError, StoreFailure};

/// Buckets the fail-open fallback keeps in memory at most.
const FALLBACK_KEYS: usize = 100_000;

/// One store's failure handling.
pub(crate) struct Fallback {
    store: &'static str,
    failure: Failure,
    /// Fail-open's buckets: each key's size, draining at `rate × share`.
    local: Option<KeyedBuckets<String>>,
    health: StoreHealth,
    default: Quota,
}

impl Fallback {
    /// Fail-closed, probing every second; metrics labelled `throttle = name`.
    pub(crate) fn new(store: &'static str, name: &str, default: Quota) -> Self {
        Self {
            store,
            failure: Failure::FailClosed,
            local: None,
            health: StoreHealth::new(name, Duration::from_secs(1)),
            default,
        }
    }

    /// Sets the failure mode; fail-open needs `local_share` in `(0, 1]`.
    pub(crate) fn set_failure(&mut self, failure: Failure) -> Result<(), QuotaError> {
        self.local = match failure {
            Failure::FailOpen { local_share } => {
                if !(local_share > 0.0 && local_share <= 1.0) {
                    return Err(QuotaError::InvalidRate(local_share));
                }
                let table = KeyedBuckets::new(FALLBACK_KEYS, scaled(self.default, local_share)?)
                    .map_err(|_| QuotaError::InvalidRate(local_share))?;
                Some(table)
            }
            Failure::FailClosed => None,
        };
        self.failure = failure;
        Ok(())
    }

    pub(crate) fn failure(&self) -> Failure {
        self.failure
    }

    pub(crate) fn set_probe_interval(&mut self, interval: Duration) {
        self.health.set_probe_interval(interval);
    }

    /// Whether the store is considered down.
    pub(crate) fn is_down(&self) -> bool {
        self.health.is_down()
    }

    /// Runs one call to the store unless the store is paused after a
    /// failure; its outcome sets the store's health.
    pub(crate) async fn guard<T>(
        &self,
        call: impl Future<Output = Result<T, String>>,
    ) -> Result<T, StoreFailure> {
        if !self.health.should_try() {
            return Err(StoreFailure::new(
                self.store,
                "down after a failure, waiting to probe again",
            ));
        }
        match call.await {
            Ok(t) => {
                self.health.succeeded();
                Ok(t)
            }
            Err(detail) => {
                tracing::debug!(store = self.store, error = %detail, "bucket store call failed");
                self.health.failed();
                Err(StoreFailure::new(self.store, detail))
            }
        }
    }

    /// The answer of the fail-open buckets to a call the store failed, or
    /// the failure when fail-closed.
    pub(crate) fn or_local<T>(
        &self,
        failed: StoreFailure,
        key: &str,
        local: impl FnOnce(&KeyedBuckets<String>, &String) -> Result<T, BucketError>,
    ) -> Result<T, BucketError> {
        match &self.local {
            Some(table) => local(table, &key.to_owned()),
            None => Err(failed.into()),
        }
    }

    /// The store answered that `key` has `quota`: fail-open's bucket for it
    /// takes the same size (at its share of the rate) from now on.
    pub(crate) fn learn(&self, key: &str, quota: Quota) {
        let (Some(local), Failure::FailOpen { local_share }) = (&self.local, self.failure) else {
            return;
        };
        // The common answer (the default, and no override to undo) costs
        // no key copy and no lock.
        if quota == self.default && local.overrides() == 0 {
            return;
        }
        let Ok(mine) = scaled(quota, local_share) else {
            return;
        };
        let key = key.to_owned();
        if local.quota(&key) == mine {
            return;
        }
        if quota == self.default {
            local.clear_quota(&key);
        } else if local.set_quota(key, mine).is_err() {
            tracing::warn!(
                store = self.store,
                "fail-open fallback: too many quota overrides"
            );
        }
    }
}

/// `quota` draining at `share` of its rate.
fn scaled(quota: Quota, share: f64) -> Result<Quota, QuotaError> {
    Quota::per_second(quota.rate() * share).burst(quota.size())
}
