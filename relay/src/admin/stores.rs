//! The shared stores `/readyz` asks: the tenant quota store in Redis or
//! PostgreSQL, and with `queue = redis` the shared queue's Redis. A quota
//! store is down when a quota read does not answer within a second,
//! answers an error (failing closed), or answers from the store's local
//! fallback (failing open: the fleet no longer shares its quotas); the
//! shared queue's Redis is down when it does not answer a depth read within
//! a second.

use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::BucketStore;

/// How long a store has to answer the probe.
const PROBE: Duration = Duration::from_secs(1);

/// The key the probe reads (a quota read changes nothing).
const PROBE_KEY: &str = "dripfeed-relay-readyz";

/// A store, and how to tell it is in its fallback.
#[derive(Clone)]
pub struct StoreCheck {
    /// `redis` or `postgres`.
    pub name: &'static str,
    probe: Probe,
}

/// How a store is asked.
#[derive(Clone)]
// Without a backend no store is made: the relay then has nothing to ask.
#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
enum Probe {
    /// A quota read, and whether the answer came from the fallback.
    Quotas {
        store: Arc<dyn BucketStore>,
        in_fallback: Arc<dyn Fn() -> bool + Send + Sync>,
    },
    /// The shared queue's Redis.
    #[cfg(feature = "redis")]
    Queue(Arc<crate::queue::shared::Shared>),
}

impl StoreCheck {
    /// The check of `store`, named `name`; `in_fallback` says whether it
    /// answers from its local fallback now. (Only the backends make one.)
    #[cfg(any(feature = "redis", feature = "postgres"))]
    pub fn new(
        name: &'static str,
        store: Arc<dyn BucketStore>,
        in_fallback: impl Fn() -> bool + Send + Sync + 'static,
    ) -> StoreCheck {
        StoreCheck {
            name,
            probe: Probe::Quotas {
                store,
                in_fallback: Arc::new(in_fallback),
            },
        }
    }

    /// The check of the shared queue's Redis (`queue = redis`).
    #[cfg(feature = "redis")]
    pub fn queue(shared: Arc<crate::queue::shared::Shared>) -> StoreCheck {
        StoreCheck {
            name: "redis",
            probe: Probe::Queue(shared),
        }
    }

    /// Why the store is down, or `None` while it answers.
    pub async fn down(&self) -> Option<String> {
        let name = self.name;
        match &self.probe {
            Probe::Quotas { store, in_fallback } => {
                match tokio::time::timeout(PROBE, store.quota(PROBE_KEY)).await {
                    Err(_) => Some(format!("{name} did not answer within {PROBE:?}")),
                    Ok(Err(e)) => Some(format!("{name}: {e}")),
                    Ok(Ok(_)) if in_fallback() => Some(format!(
                        "{name} is unreachable: tenant quotas come from this relay's fallback"
                    )),
                    Ok(Ok(_)) => None,
                }
            }
            #[cfg(feature = "redis")]
            Probe::Queue(shared) => match tokio::time::timeout(PROBE, shared.ping()).await {
                Err(_) => Some(format!(
                    "{name} (the shared queue) did not answer within {PROBE:?}"
                )),
                Ok(Err(e)) => Some(format!("{name} (the shared queue): {e}")),
                Ok(Ok(())) => None,
            },
        }
    }
}
