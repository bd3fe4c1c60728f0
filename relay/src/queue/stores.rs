//! The shared tenant quota store `/readyz` asks (Redis or PostgreSQL): down
//! when a quota read does not answer within a second, answers an error
//! (failing closed), or answers from the store's local fallback (failing
//! open: the fleet no longer shares its quotas). The fleet's queue checks
//! its own Redis (its engine's `down`).

use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::BucketStore;

/// How long a store has to answer the probe.
const PROBE: Duration = Duration::from_secs(1);

/// The key the probe reads (a quota read changes nothing).
const PROBE_KEY: &str = "dripfeed-relay-readyz";

/// A store, and how to tell it is in its fallback.
#[derive(Clone)]
pub(crate) struct StoreCheck {
    /// `redis` or `postgres`.
    pub name: &'static str,
    store: Arc<dyn BucketStore>,
    in_fallback: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl StoreCheck {
    /// The check of `store`, named `name`; `in_fallback` says whether it
    /// answers from its local fallback now. Only the backends make one: a
    /// build without them never does.
    #[allow(dead_code)]
    pub(crate) fn new(
        name: &'static str,
        store: Arc<dyn BucketStore>,
        in_fallback: impl Fn() -> bool + Send + Sync + 'static,
    ) -> StoreCheck {
        StoreCheck {
            name,
            store,
            in_fallback: Arc::new(in_fallback),
        }
    }

    /// Why the store is down, or `None` while it answers.
    pub(crate) async fn down(&self) -> Option<String> {
        let name = self.name;
        match tokio::time::timeout(PROBE, self.store.quota(PROBE_KEY)).await {
            Err(_) => Some(format!("{name} did not answer within {PROBE:?}")),
            Ok(Err(e)) => Some(format!("{name}: {e}")),
            Ok(Ok(_)) if (self.in_fallback)() => Some(format!(
                "{name} is unreachable: tenant quotas come from this relay's fallback"
            )),
            Ok(Ok(_)) => None,
        }
    }
}
