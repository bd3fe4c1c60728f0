//! Copies sent again in the fleet (a resend, a recover), as their
//! endpoint's queue has room: a dead letter goes back from the fleet's
//! dead letters (so a letter is redriven once, whichever way it goes
//! back), one whose letter is gone is admitted again only while its status
//! still says dead-lettered, and a delivered copy (a resend) is queued
//! anew. Each runs in a task of its own, until every copy found its place
//! or the endpoint is deleted; its first turn, what the queue has room
//! for, before the resend or recover is answered.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::super::lane::Lane;
use super::super::redis::queue::Again;
use super::super::shared::Shared;
use super::fan_out::{Queued, copy_bytes, queue_copy};
use crate::catalog::Catalog;

/// How long a task sending copies again waits between looks for room in
/// its endpoint's queue.
const ROOM_POLL: Duration = Duration::from_millis(200);
/// Looks that find Redis unreadable before such a task gives up (the
/// copies stay dead-lettered, recoverable again): about a minute.
const MOST_FAILED_LOOKS: u32 = 300;
/// The longest a resend or a recover waits for its first turn before it
/// answers (the task goes on after).
const FIRST_TURN_MOST: Duration = Duration::from_secs(5);

/// The entries of `wanted` (job ids) in `lane`'s dead letters (one read
/// of the dead letters, a page at a time).
async fn letters_of(lane: &Lane, wanted: &HashSet<String>) -> HashMap<String, String> {
    let mut found = HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let Ok(got) = lane.queue.dead_letters(after.as_deref(), 512).await else {
            break;
        };
        let Some(last) = got.last() else { break };
        after = Some(last.entry.clone());
        let n = got.len();
        for d in got {
            if wanted.contains(&d.id) {
                found.insert(d.id, d.entry);
            }
        }
        if n < 512 || found.len() == wanted.len() {
            break;
        }
    }
    found
}

/// Sends `endpoint`'s dead-lettered copies of `app`'s events `ids` again
/// (each granted a resend already), as its queue has room, in a task of
/// its own; returns once the task's first turn has sent what there was
/// room for (or after [`FIRST_TURN_MOST`]), so a resend answered with room
/// in its queue has been queued in the fleet before its answer (a relay
/// stopped right after loses none: before, each waited the grant's hold,
/// ten minutes, to read as dead-lettered again). Copies left for later
/// still wait on this relay.
pub(super) async fn send_again(
    shared: Arc<Shared>,
    catalog: Arc<Catalog>,
    app: String,
    endpoint: String,
    ids: Vec<u64>,
) {
    let mut again = Resending {
        shared,
        catalog,
        app,
        endpoint,
        left: ids.into(),
        failed: 0,
    };
    let (first, first_done) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut first = Some(first);
        loop {
            let turn = again.turn().await;
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
            match turn {
                Turn::Done => return,
                Turn::Wait => tokio::time::sleep(ROOM_POLL).await,
                Turn::More => {}
            }
        }
    });
    // Dropped (the caller gone) or timed out, the task goes on.
    let _ = tokio::time::timeout(FIRST_TURN_MOST, first_done).await;
}

/// A task sending copies again.
struct Resending {
    shared: Arc<Shared>,
    catalog: Arc<Catalog>,
    app: String,
    endpoint: String,
    left: VecDeque<u64>,
    /// Looks in a row that found Redis unreadable.
    failed: u32,
}

/// What a turn of [`Resending`] leaves.
enum Turn {
    /// Every copy found its place, or none will (the endpoint deleted, the
    /// relay stopping, Redis away too long).
    Done,
    /// Copies wait for room (or for Redis): the next turn after a pause.
    Wait,
    /// More copies to send, room maybe: the next turn at once.
    More,
}

impl Resending {
    /// A look that found Redis unreadable: the next after a pause, or,
    /// after [`MOST_FAILED_LOOKS`] in a row, none (the copies stay in the
    /// dead letters, recoverable again).
    fn failed_look(&mut self, e: &impl std::fmt::Display) -> Turn {
        self.failed += 1;
        if self.failed == MOST_FAILED_LOOKS {
            tracing::warn!(error = %e, endpoint = %self.endpoint, left = self.left.len(), "copies to send again were left in the dead letters: Redis did not answer");
            return Turn::Done;
        }
        Turn::Wait
    }

    /// Sends as many copies as its endpoint's queue has room for.
    async fn turn(&mut self) -> Turn {
        let (shared, endpoint) = (&self.shared, self.endpoint.as_str());
        if self.left.is_empty() {
            return Turn::Done;
        }
        let Some(lane) = shared.lane(endpoint).filter(|l| l.open) else {
            tracing::warn!(endpoint = %endpoint, left = self.left.len(), "copies to send again were left in the dead letters: the endpoint was deleted");
            return Turn::Done;
        };
        if self.catalog.is_closing() {
            return Turn::Done;
        }
        // A good read does not reset the failures in a row: a redrive
        // that fails every turn after it must still end the task.
        let depth = match lane.queue.depth().await {
            Ok(d) => d,
            Err(e) => return self.failed_look(&e),
        };
        let room = usize::try_from(lane.bound_now().saturating_sub(depth)).unwrap_or(0);
        if room == 0 {
            // A look that reached Redis: the failures were not in a row.
            self.failed = 0;
            return Turn::Wait;
        }
        let now: Vec<u64> = self.left.drain(..room.min(self.left.len())).collect();
        let wanted: HashSet<String> = now.iter().map(u64::to_string).collect();
        let letters = letters_of(&lane, &wanted).await;
        let mut wait = false;
        let mut copy_failed = None;
        if !letters.is_empty() {
            let entries: Vec<String> = letters.values().cloned().collect();
            let redriven = lane.queue.redrive(&entries, lane.bound_now()).await;
            if let Ok((moved, _)) = redriven
                && moved > 0
            {
                shared.admitted(endpoint);
            }
            match redriven {
                // All went back.
                Ok((_, 0)) => {}
                // Some did not (no room after all, or taken meanwhile):
                // looked at again after a pause; one that went back is
                // then seen as queued and dropped.
                Ok(_) => {
                    let back = letters.keys().filter_map(|id| id.parse::<u64>().ok());
                    self.left.extend(back);
                    wait = true;
                }
                Err(e) => {
                    // Every copy of this turn looked at again after a pause.
                    self.left.extend(now.iter().copied());
                    return self.failed_look(&e);
                }
            }
        }
        for &id in now
            .iter()
            .filter(|id| !letters.contains_key(&id.to_string()))
        {
            let (record, payload) = match (
                shared.events.record(&self.app, id).await,
                shared.events.payload(&self.app, id).await,
            ) {
                (Ok(Some(record)), Ok(payload)) => (record, payload),
                (Ok(None), _) => continue, // forgotten meanwhile (event_retention)
                (Err(e), _) | (_, Err(e)) => {
                    // Unreadable now: looked at again after a pause.
                    self.left.push_back(id);
                    copy_failed = Some(e.to_string());
                    continue;
                }
            };
            let bytes = copy_bytes(&record, &payload.unwrap_or_default());
            let owner = record.tenant.as_deref();
            match queue_copy(shared, &self.app, id, endpoint, &bytes, owner, Again::Dead).await {
                Queued::Failed(e) => {
                    tracing::debug!(error = %e, event = id, "the fleet's events: a copy to send again is tried again");
                    self.left.push_back(id);
                    copy_failed = Some(e);
                }
                Queued::Gone => return Turn::Done,
                Queued::Yes | Queued::Overflow | Queued::Held => {}
            }
        }
        if let Some(e) = copy_failed {
            return self.failed_look(&e);
        }
        // A turn that reached Redis throughout.
        self.failed = 0;
        match (self.left.is_empty(), wait) {
            (true, _) => Turn::Done,
            (false, true) => Turn::Wait,
            (false, false) => Turn::More,
        }
    }
}
