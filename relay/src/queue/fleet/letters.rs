//! `queue = redis`: the fleet's dead letters, kept in Redis beside each
//! destination's queue (written atomically with the end of the job), read
//! a page at a time and put back into the queue from any relay.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use dripfeed::journal::JobCodec;

use super::lane::Lane;
use super::redis::queue::RedisQueue;
use super::shared::Shared;
use crate::dead_letter::page::DeadLetter;
use crate::domain::job::Job;
use crate::queue::contract::{Kept, Redriven};

/// A page of the fleet's dead letters.
pub(crate) struct Page {
    /// The letters, by destination name then oldest first.
    pub lines: Vec<DeadLetter>,
    /// Where the next page starts (`r:DESTINATION:ENTRY`).
    pub next: Option<String>,
    /// Whether the page stopped at its limit.
    pub more: bool,
}

/// Where a page starts: a destination, and the entry after which.
pub(crate) struct Cursor {
    destination: String,
    entry: String,
}

impl Cursor {
    /// A cursor as [`Page::next`] gives it: `r:DESTINATION:ENTRY` in
    /// unpadded URL-safe base64 (opaque, as the local engine's are).
    pub(crate) fn parse(text: &str) -> Option<Cursor> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .ok()?;
        let raw = String::from_utf8(raw).ok()?;
        let rest = raw.strip_prefix("r:")?;
        let (destination, entry) = rest.split_once(':')?;
        let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'-');
        (crate::config::valid_name(destination) && ok(entry)).then(|| Cursor {
            destination: destination.to_owned(),
            entry: entry.to_owned(),
        })
    }

    fn text(destination: &str, entry: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("r:{destination}:{entry}"))
    }
}

/// Whether dead letter `d` of `name` is an event's copy that the
/// endpoint of that name now cannot take ([`Catalog::takes_event`]).
///
/// [`Catalog::takes_event`]: crate::catalog::Catalog::takes_event
fn not_its_applications(
    catalog: &crate::catalog::Catalog,
    name: &str,
    d: &super::redis::queue_dead::DeadLetter,
) -> bool {
    let Some(of) = Job::decode(&d.job).ok().and_then(|j| j.event_of.clone()) else {
        return false;
    };
    let seq = d.id.parse::<u64>().unwrap_or(u64::MAX);
    !catalog.takes_event(name, Some(&of.app), seq)
}

/// A dead letter as the admin API shows it.
fn shown(destination: &str, d: super::redis::queue_dead::DeadLetter) -> DeadLetter {
    let job = Job::decode(&d.job).ok();
    let raw = job.as_ref().map_or(&d.job[..], |j| &j.body[..]);
    let (body, body_base64) = match std::str::from_utf8(raw) {
        Ok(text) => (Some(text.to_owned()), None),
        Err(_) => (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(raw)),
        ),
    };
    DeadLetter {
        reason: d.reason,
        id: Some(d.id).filter(|id| !id.is_empty()),
        destination: destination.to_owned(),
        attempts: d.attempts,
        last_status: d.last_status.map(u32::from),
        error: d.error,
        tenant: job.as_ref().and_then(|j| j.tenant.clone()),
        event_type: job
            .as_ref()
            .and_then(|j| j.event_of.as_ref().map(|e| e.kind.to_string())),
        content_type: job.as_ref().and_then(|j| j.content_type.clone()),
        received_unix_ms: job.as_ref().map_or(0, |j| j.received_unix_ms),
        body,
        body_base64,
    }
}

/// Destinations whose dead letters are counted in one round trip.
const LETTER_COUNTS_AT_ONCE: usize = 256;

/// Those of `batch` that keep dead letters, in order (their counts in one
/// round trip; on a cluster, 16 at a time).
async fn lettered(batch: &[(String, Arc<Lane>)]) -> Result<Vec<(String, Arc<Lane>)>, String> {
    let queues: Vec<&RedisQueue> = batch.iter().map(|(_, l)| &l.queue).collect();
    let counts = RedisQueue::dead_counts(&queues)
        .await
        .map_err(|e| e.to_string())?;
    Ok(batch
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(lane, _)| lane.clone())
        .collect())
}

impl Shared {
    /// The destinations' lanes in name order, from `first` on (all with
    /// `None`), only `only` if given; only open ones with `open`.
    fn lanes_from(
        &self,
        first: Option<&str>,
        only: Option<&str>,
        open: bool,
    ) -> Vec<(String, Arc<Lane>)> {
        // One destination's: its lane, not a sort of every lane.
        if let Some(only) = only {
            return self
                .lane(only)
                .filter(|l| l.open || !open)
                .filter(|_| first.is_none_or(|f| only >= f))
                .map(|l| (only.to_owned(), l))
                .into_iter()
                .collect();
        }
        self.all()
            .into_iter()
            .filter(|(_, l)| l.open || !open)
            .filter(|(n, _)| only.is_none_or(|o| o == n.as_str()))
            .filter(|(n, _)| first.is_none_or(|f| n.as_str() >= f))
            .collect()
    }

    /// Those of `lanes` that keep dead letters, in order, their counts
    /// read [`LETTER_COUNTS_AT_ONCE`] to a round trip: a redrive by ids
    /// asks the many destinations with none for a count (400 round trips
    /// at 100,000 destinations), not each for its letters, one round trip
    /// at a time. One lane is taken as it is.
    async fn with_letters(
        &self,
        lanes: Vec<(String, Arc<Lane>)>,
    ) -> Result<Vec<(String, Arc<Lane>)>, String> {
        if lanes.len() <= 1 {
            return Ok(lanes);
        }
        let mut kept = Vec::new();
        for batch in lanes.chunks(LETTER_COUNTS_AT_ONCE) {
            kept.extend(lettered(batch).await?);
        }
        Ok(kept)
    }

    /// Up to `limit` dead letters of `destination` (or every destination's,
    /// in name order), from `cursor` on. Every destination's are counted a
    /// batch at a time, as far as the page goes, and only those with
    /// letters read.
    pub(crate) async fn dead_letters(
        &self,
        destination: Option<&str>,
        cursor: Option<Cursor>,
        limit: usize,
    ) -> Result<Page, String> {
        let mut page = Page {
            lines: Vec::new(),
            next: cursor
                .as_ref()
                .map(|c| Cursor::text(&c.destination, &c.entry)),
            more: false,
        };
        let first = cursor.as_ref().map(|c| c.destination.as_str());
        // Deleted destinations' too: their last webhooks may be here.
        let lanes = self.lanes_from(first, destination, false);
        for batch in lanes.chunks(LETTER_COUNTS_AT_ONCE) {
            let batch = match lanes.len() {
                1 => batch.to_vec(),
                _ => lettered(batch).await?,
            };
            for (name, lane) in batch {
                let after = cursor
                    .as_ref()
                    .filter(|c| c.destination == name)
                    .map(|c| c.entry.as_str());
                let want = limit.saturating_sub(page.lines.len());
                // One more than the page takes: whether more follow (a
                // full page asks the next destinations for one).
                let mut got = lane
                    .queue
                    .dead_letters(after, want + 1)
                    .await
                    .map_err(|e| e.to_string())?;
                if got.len() > want {
                    got.truncate(want);
                    page.more = true;
                }
                if let Some(last) = got.last() {
                    page.next = Some(Cursor::text(&name, &last.entry));
                }
                page.lines.extend(got.into_iter().map(|d| shown(&name, d)));
                if page.more {
                    return Ok(page);
                }
            }
        }
        Ok(page)
    }

    /// Puts back into the fleet's queue up to `most` dead letters: those
    /// whose id is in `ids`, or every one of `destination`, each into the
    /// queue it came from. A letter of a deleted destination stays where
    /// it is, named in [`Redriven::kept`].
    pub(crate) async fn redrive(
        &self,
        ids: Option<&HashSet<String>>,
        destination: Option<&str>,
        most: usize,
        catalog: &crate::catalog::Catalog,
    ) -> Result<Redriven, String> {
        let mut done = Redriven::default();
        let mut left = most;
        // Deleted destinations' too: their letters are named as kept.
        for (name, lane) in self
            .with_letters(self.lanes_from(None, destination, false))
            .await?
        {
            let mut after: Option<String> = None;
            let mut picked = Vec::new();
            // Through the whole stream when picking by id; by destination,
            // the oldest `left`.
            loop {
                let got = lane
                    .queue
                    .dead_letters(after.as_deref(), 512)
                    .await
                    .map_err(|e| e.to_string())?;
                let Some(last) = got.last() else { break };
                after = Some(last.entry.clone());
                let n = got.len();
                for d in got {
                    if ids.is_none_or(|ids| ids.contains(&d.id)) {
                        if picked.len() == left {
                            done.more = true;
                            break;
                        }
                        if not_its_applications(catalog, &name, &d) {
                            // A deleted application's copy: never to one
                            // made again under its name.
                            done.kept.push(Kept {
                                id: Some(d.id),
                                destination: Some(name.clone()),
                                reason: "destination-gone",
                            });
                            continue;
                        }
                        picked.push((d.entry, d.id));
                    }
                }
                if done.more || n < 512 {
                    break;
                }
            }
            left -= picked.len();
            if lane.open {
                let entries: Vec<String> = picked.into_iter().map(|(e, _)| e).collect();
                let (m, r) = lane
                    .queue
                    .redrive(&entries, lane.bound_now())
                    .await
                    .map_err(|e| e.to_string())?;
                done.readmitted += m;
                done.refused += r;
                if m > 0 {
                    // Admitted again: counted as the local engine counts it.
                    lane.counts.readmitted(m);
                    self.admitted(&name);
                }
            } else {
                done.kept.extend(picked.into_iter().map(|(_, id)| Kept {
                    id: Some(id).filter(|id| !id.is_empty()),
                    destination: Some(name.clone()),
                    reason: "destination-gone",
                }));
            }
            if left == 0 || done.more {
                done.more |= left == 0 && destination.is_some();
                break;
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_a_destination_and_an_entry() {
        let c = Cursor::parse(&Cursor::text("billing", "1700000000000-3")).expect("a cursor");
        assert_eq!(
            (c.destination.as_str(), c.entry.as_str()),
            ("billing", "1700000000000-3")
        );
        for bad in [
            "",
            "r:",
            "r:billing",
            "r::1-0",
            "r:bill ing:1-0",
            "r:billing:1-0x",
            "x:billing:1-0",
        ] {
            let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bad);
            assert!(Cursor::parse(&text).is_none(), "{bad}");
            assert!(Cursor::parse(bad).is_none(), "{bad}");
        }
    }
}
