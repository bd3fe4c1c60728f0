//! A webhook into the fleet's queue: [`Shared::admit`] claims its
//! idempotency key, charges its tenant and adds its entry (undoing the
//! first two when nothing was queued), and [`admit`] gives the contract's
//! answer: the queue's ([`Admit`]) made an [`Accepted`] or a [`Refusal`],
//! counted in this relay's metrics, each `Retry-After` spread by the
//! library's rule.

use std::time::Duration;

use dripfeed::journal::JobCodec;
use dripfeed::keyed::{AdmitError, BucketError};

use super::counts::Refused;
use super::lane::{Lane, number_of};
use super::redis::keys::KeyClaim;
use super::redis::queue::Admission as Queued;
use super::shared::{Admit, Shared};
use super::webhook_id;
use crate::domain::job::Job;
use crate::domain::names::{body_hash, scoped_key};
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
    // Its drains wake (here at once, the fleet's within a poll); a repeat
    // too (its first admission's relay may have died). Not for an
    // admission Redis did not answer: a Redis that slow is not asked for
    // more (the drains find it at their next claim if it got in).
    if let Ok(Admit::Queued(_) | Admit::Evicted(_) | Admit::Unconfirmed(..) | Admit::Repeat(_)) =
        answer
    {
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
        Ok(Admit::OverQuota(over)) => {
            counts.refused(Refused::OverQuota);
            Err(match over {
                Some(over) => Refusal::over_quota(&over),
                None => Refusal::after(Cause::OverQuota, Duration::from_secs(60)),
            })
        }
        Ok(Admit::QuotaUnavailable) => {
            counts.refused(Refused::StoreDown);
            Err(Refusal::after(
                Cause::Unavailable(Store::Quotas),
                Duration::from_secs(1),
            ))
        }
        Ok(Admit::Unconfirmed(replicas, id)) => {
            // Queued all the same: counted as admitted.
            counts.admitted();
            tracing::warn!(
                replicas,
                "shared queue: a webhook was not confirmed by enough replicas"
            );
            Err(Refusal::after(
                Cause::Unreplicated(replicas, id),
                Duration::from_secs(1),
            ))
        }
        Ok(Admit::Unanswered(id)) => {
            // Neither admitted nor refused here: Redis's own count says
            // which, once it runs or drops it.
            tracing::warn!(
                id,
                "shared queue: Redis did not answer a webhook's admission in time; it may be queued"
            );
            Err(Refusal::after(
                Cause::Unanswered(id),
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

impl Shared {
    /// Queues `job` for `destination`, charging one webhook to the tenant
    /// `charge` first (and refunding it if nothing was queued: a repeat or
    /// a full queue costs the tenant nothing); `Err` says why Redis could
    /// not take it. With an idempotency `key` (already scoped by tenant and
    /// encoded) the key is the fleet's ([`RedisKeys`](super::redis::keys::RedisKeys)): it names this
    /// destination and body, whichever relay and queue see it again.
    pub(crate) async fn admit(
        &self,
        destination: &str,
        job: &Job,
        key: Option<&str>,
        charge: Option<&str>,
        owner: Option<&str>,
    ) -> Result<Admit, String> {
        let lane = self
            .lane(destination)
            .filter(|l| l.open)
            .ok_or("not a destination of the shared queue")?;
        let lane = &*lane;
        let err = |e: dripfeed::global::RedisError| e.to_string();
        // The key first: a repeat is answered (and not charged) here.
        let keyed = match key {
            None => None,
            Some(key) => {
                let request = format!("{destination}|{:016x}", body_hash(&job.body));
                let fresh = webhook_id::fresh(destination).to_string();
                match self
                    .keys
                    .claim(key, &request, &fresh, self.remember)
                    .await
                    .map_err(err)?
                {
                    // A repeat is answered as its admission was: with
                    // replicas to wait for, once they have it.
                    KeyClaim::Repeat(id) => {
                        let confirmed = lane.queue.confirm(&id).await.map_err(err)?;
                        return self.answer(lane, confirmed);
                    }
                    KeyClaim::Conflict(_) => return Ok(Admit::KeyReused),
                    KeyClaim::New => Some((key, fresh, false)),
                    // Its first admission is under way, or its relay died
                    // between admitting and recording it: admitted under
                    // the same id, the queue tells which (not charged
                    // twice).
                    KeyClaim::Pending(id) => Some((key, id, true)),
                }
            }
        };
        let charge = match &keyed {
            Some((_, _, true)) => None,
            _ => charge,
        };
        let charged = match (charge, &self.quotas) {
            (Some(tenant), Some(store)) => match store.try_admit(tenant, 1.0).await {
                Ok(_) => Some((tenant, store)),
                Err(BucketError::Unavailable(_)) => {
                    self.release(&keyed).await;
                    return Ok(Admit::QuotaUnavailable);
                }
                Err(e) => {
                    // Over quota, or a quota smaller than one webhook
                    // (refused by the configuration's checks).
                    let over = match e.as_admit() {
                        Some(AdmitError::OverQuota(o)) => Some(*o),
                        _ => None,
                    };
                    self.release(&keyed).await;
                    if let Err(e) = lane.queue.count_refused().await {
                        tracing::debug!(error = %e, "shared queue: a refusal was not counted");
                    }
                    return Ok(Admit::OverQuota(over));
                }
            },
            _ => None,
        };
        let answer = match &keyed {
            Some((_, id, _)) => self.queue_as(lane, job, id, owner).await,
            None => self.queue(destination, lane, job, owner).await,
        };
        match (&keyed, &answer) {
            (
                Some((key, id, _)),
                Ok(
                    Admit::Queued(_)
                    | Admit::Repeat(_)
                    | Admit::Unconfirmed(..)
                    | Admit::Evicted(_)
                    | Admit::Deferred(_),
                ),
            ) => {
                if let Err(e) = self.keys.accept(key, id, self.remember).await {
                    // Left pending under its id: a retry finds it and the
                    // queue answers it as seen.
                    tracing::warn!(error = %e, "shared queue: an idempotency key's admission was not recorded");
                }
            }
            // Perhaps queued under the key's id: the key stays pending, so
            // a retry with it finds that id and the queue tells.
            (_, Ok(Admit::Unanswered(_))) => {}
            (Some(_), Ok(_)) => self.release(&keyed).await,
            _ => {}
        }
        if let Some((tenant, store)) = charged
            && !matches!(
                answer,
                Ok(Admit::Queued(_)
                    | Admit::Unconfirmed(..)
                    | Admit::Evicted(_)
                    | Admit::Deferred(_)
                    | Admit::Unanswered(_))
            )
            && let Err(e) = store.refund(tenant, 1.0).await
        {
            tracing::warn!(error = %e, "shared queue: a tenant's charge for a webhook not queued was not refunded");
        }
        answer
    }

    /// A key this admission claimed anew, given back (its webhook was
    /// refused: a retry may try again). A pending key found is another
    /// admission's: left as it is.
    async fn release(&self, keyed: &Option<(&str, String, bool)>) {
        if let Some((key, id, false)) = keyed
            && let Err(e) = self.keys.release(key, id).await
        {
            tracing::warn!(error = %e, "shared queue: a refused webhook's idempotency key was not given back");
        }
    }

    /// [`admit`](Self::admit)'s queueing of a webhook without a key, in one
    /// round trip.
    async fn queue(
        &self,
        destination: &str,
        lane: &Lane,
        job: &Job,
        owner: Option<&str>,
    ) -> Result<Admit, String> {
        let bytes = encoded(job);
        // A random id naming its destination ([`webhook_id`]); one still
        // held is drawn again.
        let mut answer = Queued::Taken;
        // A redriven webhook keeps the id it had (its status starts over).
        let mut id = Some(job.trail.id()).filter(|id| *id != 0);
        for _ in 0..4 {
            let id = id
                .take()
                .unwrap_or_else(|| webhook_id::fresh(destination))
                .to_string();
            answer = match lane
                .queue
                .admit_owned(&id, &bytes, None, lane.bound_now(), self.remember, owner)
                .await
            {
                Ok(answer) => answer,
                Err(e) => return unanswered(e, &id),
            };
            if answer != Queued::Taken {
                break;
            }
        }
        self.answer(lane, answer)
    }

    /// [`admit`](Self::admit)'s queueing of a keyed webhook as `id` (its
    /// key's), unless a webhook with that id got in before: one round trip.
    async fn queue_as(
        &self,
        lane: &Lane,
        job: &Job,
        id: &str,
        owner: Option<&str>,
    ) -> Result<Admit, String> {
        let answer = match lane
            .queue
            .admit_fresh(id, &encoded(job), lane.bound_now(), owner)
            .await
        {
            Ok(answer) => answer,
            Err(e) => return unanswered(e, id),
        };
        self.answer(lane, answer)
    }

    /// What the queue answered, as [`Admit`].
    fn answer(&self, lane: &Lane, answer: Queued) -> Result<Admit, String> {
        Ok(match answer {
            Queued::Added { id, .. } => Admit::Queued(number_of(&id)),
            Queued::Evicted { id, .. } => Admit::Evicted(number_of(&id)),
            Queued::Deferred { id } => Admit::Deferred(number_of(&id)),
            Queued::Repeat { id } | Queued::Seen { id } => Admit::Repeat(number_of(&id)),
            Queued::Unconfirmed { replicas, id } => Admit::Unconfirmed(replicas, number_of(&id)),
            Queued::Taken => return Err("no free id in four draws".into()),
            Queued::Full { depth } => Admit::Full(Duration::from_secs_f64(
                (depth as f64 / lane.rate_now()).min(3600.0),
            )),
        })
    }
}

/// A queueing of webhook `id` that failed with `e`: [`Admit::Unanswered`]
/// when Redis may have run it all the same, else the failure.
fn unanswered(e: dripfeed::global::RedisError, id: &str) -> Result<Admit, String> {
    match e.may_have_run() {
        true => Ok(Admit::Unanswered(number_of(id))),
        false => Err(e.to_string()),
    }
}

/// A webhook as its queue entry holds it.
fn encoded(job: &Job) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(job.body.len() + 64);
    job.encode(&mut bytes);
    bytes
}
