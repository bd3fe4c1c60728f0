//! `queue = redis`: a deleted destination's end. Once its deadline has
//! passed and this relay's drain for it has stopped, what its queue still
//! holds is dead-lettered (`destination-deleted`) into the fleet's dead
//! letters: its retries taken back early, its new entries claimed, and
//! entries pending longer than a delivery can take (a relay that stopped
//! or died holding them) taken over. Every relay sweeps at once; a claim is
//! never handed to two, so none is dead-lettered twice.

use std::time::Duration;

use super::redis::map::RedisMap;
use super::redis::queue::Claimed;
use super::redis::queue_status::Ending;

use super::shared::Shared;

/// Entries one step takes at most.
const STEP: usize = 64;
/// The pause between steps that found nothing while something is left.
const PAUSE: Duration = Duration::from_secs(1);
/// Why they are dead letters (unless the deletion says otherwise).
const REASON: &str = "destination-deleted";

impl Shared {
    /// The events' copies among `taken` (dead-lettered for `reason`),
    /// recorded so beside their events: a copy's state then reads so even
    /// once its status is forgotten.
    async fn copies_ended(&self, name: &str, taken: &[Claimed], reason: &str) {
        for c in taken {
            let Ok(job) = <crate::domain::job::Job as dripfeed::journal::JobCodec>::decode(&c.job)
            else {
                continue;
            };
            let Some(of) = &job.event_of else { continue };
            let id = super::lane::number_of(&c.id);
            let ended = super::redis::events::Ended::DeadLettered(reason.to_owned());
            if let Err(e) = self.events.ended(&of.app, id, name, ended).await {
                tracing::debug!(error = %e, "the fleet's events: a deleted endpoint's copy's end was not recorded");
            }
        }
    }

    /// Dead-letters what `name`'s queue holds until it is empty, as long
    /// as `map` still holds `tombstone` for it (made again meanwhile: what
    /// this relay took is handed back to the new destination's drains);
    /// returns how many this relay dead-lettered. Redis failing: tried
    /// again.
    pub(crate) async fn sweep(&self, name: &str, map: &RedisMap, tombstone: &str) -> u64 {
        let Some(lane) = self.lane(name) else {
            return 0;
        };
        let q = &lane.queue;
        let reason = match super::changes::Change::parse(tombstone) {
            Some(super::changes::Change::Deleted {
                reason: Some(r), ..
            }) => r,
            _ => REASON.to_owned(),
        };
        let reason = reason.as_str();
        let mut cursor = "0-0".to_owned();
        let mut swept = 0;
        loop {
            let mut taken: Vec<Claimed> = Vec::new();
            let step = async {
                if q.depth().await? == 0 {
                    return Ok((0, 0));
                }
                q.promote_all(256).await?;
                taken.extend(q.claim(STEP).await?);
                let (next, over) = q.reclaim_from(&cursor, self.take_over_idle(), STEP).await?;
                cursor = next;
                taken.extend(over);
                if map.get(name).await?.as_deref() != Some(tombstone) {
                    q.release(&taken).await?;
                    return Ok((0, 0));
                }
                let ends: Vec<Ending> = taken
                    .iter()
                    .map(|c| Ending::unsent(c.stream_id.clone(), reason))
                    .collect();
                if !ends.is_empty() {
                    q.end(&ends).await?;
                    self.copies_ended(name, &taken, reason).await;
                }
                Ok::<_, dripfeed::global::RedisError>((ends.len() as u64, 1))
            };
            match step.await {
                Ok((ended, left)) => {
                    swept += ended;
                    lane.counts.dead_lettered(ended);
                    if left == 0 {
                        return swept;
                    }
                    if ended == 0 {
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(destination = %name, error = %e, "a deleted destination's rest is not dead-lettered yet; trying again");
                    tokio::time::sleep(PAUSE).await;
                }
            }
        }
    }
}
