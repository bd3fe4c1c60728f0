//! A webhook into the fleet's queue, as the contract answers it: the
//! queue's answer ([`Admit`]) made an [`Accepted`] or a [`Refusal`], counted
//! in this relay's metrics, each `Retry-After` spread by the library's
//! rule.

use std::time::Duration;

use super::counts::Refused;
use super::shared::{Admit, Shared};
use crate::domain::names::scoped_key;
use crate::queue::contract::{Accepted, Admission, Cause, Refusal, Store};

/// `a` admitted into `shared`.
pub(crate) async fn admit(shared: &Shared, a: Admission) -> Result<Accepted, Refusal> {
    let Admission {
        destination,
        tenant,
        key,
        charged,
        job,
    } = a;
    let Some(lane) = shared.lane(&destination).filter(|l| l.open) else {
        // Deleted while this one was on its way in: as if it never existed.
        return Err(Refusal::now(Cause::Gone));
    };
    let counts = &lane.counts;
    let scoped = key.as_deref().map(|k| scoped_key(tenant.scope(), k));
    let charge = charged.then(|| tenant.scope());
    let owner = tenant.named.as_deref();
    let answer = shared
        .admit(&destination, &job, scoped.as_deref(), charge, owner)
        .await;
    if let Ok(Admit::Queued(_) | Admit::Evicted(_) | Admit::Unconfirmed(_) | Admit::Repeat(_)) =
        answer
    {
        // Its drains wake (here at once, the fleet's within a poll); a
        // repeat too (its first admission's relay may have died).
        shared.admitted(&destination);
    }
    match answer {
        Ok(Admit::Queued(id)) => {
            counts.admitted();
            Ok(Accepted::Queued(id))
        }
        Ok(Admit::Evicted(id)) => {
            counts.admitted();
            counts.evicted();
            Ok(Accepted::Queued(id))
        }
        Ok(Admit::Deferred(id)) => {
            counts.overflowed();
            Ok(Accepted::Deferred(id))
        }
        Ok(Admit::Repeat(id)) => Ok(Accepted::Duplicate(id)),
        Ok(Admit::KeyReused) => Err(Refusal::now(Cause::KeyReused)),
        Ok(Admit::Full(wait)) => {
            counts.refused(Refused::Overloaded);
            Err(Refusal::after(Cause::Full, wait))
        }
        Ok(Admit::OverQuota(wait)) => {
            counts.refused(Refused::OverQuota);
            Err(Refusal::after(Cause::OverQuota, wait))
        }
        Ok(Admit::QuotaUnavailable) => {
            counts.refused(Refused::StoreDown);
            Err(Refusal::after(
                Cause::Unavailable(Store::Quotas),
                Duration::from_secs(1),
            ))
        }
        Ok(Admit::Unconfirmed(replicas)) => {
            // Queued all the same: counted as admitted.
            counts.admitted();
            tracing::warn!(
                replicas,
                "shared queue: a webhook was not confirmed by enough replicas"
            );
            Err(Refusal::after(
                Cause::Unreplicated(replicas),
                Duration::from_secs(1),
            ))
        }
        Err(e) => {
            counts.refused(Refused::StoreDown);
            tracing::warn!(error = %e, "shared queue: a webhook could not be queued");
            Err(Refusal::after(
                Cause::Unavailable(Store::Queue),
                Duration::from_secs(1),
            ))
        }
    }
}
