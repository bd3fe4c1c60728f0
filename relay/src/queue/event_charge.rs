//! An event's charge to its tenant's quota, shared by both engines.

use std::sync::Arc;

use dripfeed::keyed::BucketStore;

/// One event's charge to its tenant's quota: one per event, however many
/// copies it fans out to ([`take`](Self::take)), given back when the event
/// is not taken or was taken before ([`give_back`](Self::give_back)).
pub(crate) struct EventCharge {
    store: Option<Arc<dyn BucketStore>>,
    scope: String,
}

impl EventCharge {
    /// Charges tenant `scope` one event in `store` (`None`: not charged):
    /// the refusal (429 over quota, 503 store down) if it cannot.
    pub(crate) async fn take(
        store: Option<&Arc<dyn BucketStore>>,
        scope: &str,
    ) -> Result<EventCharge, super::refusal::Refusal> {
        use super::refusal::{Cause, Refusal, Store};
        use dripfeed::keyed::{AdmitError, BucketError};
        if let Some(quotas) = store {
            match quotas.try_admit(scope, 1.0).await {
                Ok(_) => {}
                Err(BucketError::Admit(AdmitError::OverQuota(o))) => {
                    return Err(Refusal::over_quota(&o));
                }
                Err(BucketError::Unavailable(_)) => {
                    return Err(Refusal::now(Cause::Unavailable(Store::Quotas)));
                }
                Err(_) => return Err(Refusal::now(Cause::Invalid)),
            }
        }
        Ok(EventCharge {
            store: store.cloned(),
            scope: scope.to_owned(),
        })
    }

    /// Gives the charge back (the event was not taken, or was a repeat).
    pub(crate) async fn give_back(&self) {
        if let Some(quotas) = &self.store
            && let Err(e) = quotas.refund(&self.scope, 1.0).await
        {
            tracing::warn!(error = %e, "an event's quota charge could not be given back");
        }
    }
}
