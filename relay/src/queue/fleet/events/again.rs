//! Copies sent again in the fleet (a resend, a recover), as their
//! endpoint's queue has room: a dead letter goes back from the fleet's
//! dead letters (so a letter is redriven once, whichever way it goes
//! back), one whose letter is gone is admitted again only while its status
//! still says dead-lettered, and a delivered copy (a resend) is queued
//! anew. Each runs in a task of its own, until every copy found its place
//! or the endpoint is deleted.

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
/// (each granted a resend already), as its queue has room; in a task of
/// its own.
pub(super) fn send_again(
    shared: Arc<Shared>,
    catalog: Arc<Catalog>,
    app: String,
    endpoint: String,
    ids: Vec<u64>,
) {
    tokio::spawn(async move {
        let mut left: VecDeque<u64> = ids.into();
        let mut failed = 0;
        while !left.is_empty() {
            let Some(lane) = shared.lane(&endpoint).filter(|l| l.open) else {
                tracing::warn!(endpoint = %endpoint, left = left.len(), "copies to send again were left in the dead letters: the endpoint was deleted");
                return;
            };
            if catalog.is_closing() {
                return;
            }
            let depth = match lane.queue.depth().await {
                Ok(d) => d,
                Err(e) => {
                    failed += 1;
                    if failed == MOST_FAILED_LOOKS {
                        tracing::warn!(error = %e, endpoint = %endpoint, left = left.len(), "copies to send again were left in the dead letters: Redis did not answer");
                        return;
                    }
                    tokio::time::sleep(ROOM_POLL).await;
                    continue;
                }
            };
            failed = 0;
            let room = usize::try_from(lane.bound_now().saturating_sub(depth)).unwrap_or(0);
            if room == 0 {
                tokio::time::sleep(ROOM_POLL).await;
                continue;
            }
            let now: Vec<u64> = left.drain(..room.min(left.len())).collect();
            let wanted: HashSet<String> = now.iter().map(u64::to_string).collect();
            let letters = letters_of(&lane, &wanted).await;
            if !letters.is_empty() {
                let entries: Vec<String> = letters.values().cloned().collect();
                let redriven = lane.queue.redrive(&entries, lane.bound_now()).await;
                if let Ok((moved, _)) = redriven
                    && moved > 0
                {
                    shared.admitted(&endpoint);
                }
                match redriven {
                    // All went back.
                    Ok((_, 0)) => {}
                    // Some did not (no room after all, or taken meanwhile):
                    // looked at again; one that went back is then seen as
                    // queued and dropped.
                    Ok(_) | Err(_) => {
                        left.extend(letters.keys().filter_map(|id| id.parse::<u64>().ok()));
                    }
                }
            }
            for &id in now
                .iter()
                .filter(|id| !letters.contains_key(&id.to_string()))
            {
                let (Ok(Some(record)), Ok(payload)) = (
                    shared.events.record(&app, id).await,
                    shared.events.payload(&app, id).await,
                ) else {
                    continue; // forgotten meanwhile (event_retention)
                };
                let bytes = copy_bytes(&record, &payload.unwrap_or_default());
                let owner = record.tenant.as_deref();
                match queue_copy(&shared, &app, id, &endpoint, &bytes, owner, Again::Dead).await {
                    Queued::Failed(e) => {
                        tracing::debug!(error = %e, event = id, "the fleet's events: a copy to send again is tried again");
                        left.push_back(id);
                        tokio::time::sleep(ROOM_POLL).await;
                    }
                    Queued::Gone => return,
                    Queued::Yes | Queued::Overflow | Queued::Held => {}
                }
            }
        }
    });
}
