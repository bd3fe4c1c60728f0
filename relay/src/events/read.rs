//! Reading the events store: an event with its copies, an application's
//! events newest first, an endpoint's attempts newest first, the copies
//! still pending (at start), and an endpoint's dead-lettered copies in a
//! window (recover). Each is one read, O(log n + what it returns), never a
//! scan of the store.

use super::record::{CopyRecord, CopyState, EventRecord};
use super::store::{
    BY_APP, BY_ENDPOINT, COPIES, EVENTS, EventStore, PAYLOADS, PENDING, copy_key, named_key,
    seq_key, seq_of,
};
use crate::util::kv::Reader;

/// The most rows a listing reads to fill one page of a filtered listing
/// (the rest come with its cursor).
const MAX_SCAN: usize = 10_000;

/// One page of a listing, newest first, and the cursor of the next.
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    /// The sequence number to continue before (`None`: the last page).
    pub next: Option<u64>,
}

impl<T> Page<T> {
    /// A full page: the next goes on from (and with) the sequence number
    /// `from` (the fleet's event store pages so).
    #[cfg(feature = "redis")]
    pub(crate) fn more(items: Vec<T>, from: u64) -> Page<T> {
        Page {
            items,
            next: Some(from.saturating_add(1)),
        }
    }
}

/// An event with each copy, by endpoint name.
pub(crate) type WithCopies = (EventRecord, Vec<(String, CopyRecord)>);

/// The record `table` holds at `key`, read as JSON (`None`: none; one
/// that does not read is an error).
fn json<T: serde::de::DeserializeOwned>(
    read: &Reader<'_>,
    table: crate::util::kv::Table,
    key: &[u8],
) -> Result<Option<T>, String> {
    match read.get(table, key)? {
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

/// An [`EventRecord`] read without its endpoints' names (skipped, not
/// kept: a thousand for an event fanned out to a thousand).
#[derive(serde::Deserialize)]
struct Head {
    app: String,
    #[serde(rename = "type")]
    kind: String,
    created_ms: u64,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

/// A key's last 8 bytes as a sequence number.
fn tail_seq(key: &[u8]) -> u64 {
    seq_of(&key[key.len().saturating_sub(8)..])
}

impl EventStore {
    /// Event `seq`, with each copy (by endpoint name).
    pub(crate) fn event(&self, seq: u64) -> Result<Option<WithCopies>, String> {
        let read = self.db.read();
        let Some(event) = json::<EventRecord>(&read, EVENTS, &seq_key(seq))? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(event.copies.len());
        for name in &event.copies {
            if let Some(copy) = json(&read, COPIES, &copy_key(seq, name))? {
                out.push((name.clone(), copy));
            }
        }
        Ok(Some((event, out)))
    }

    /// Event `seq` with `endpoint`'s copy of it alone: one copy read, not
    /// every endpoint's (a restart reads each pending copy so, and an
    /// event fanned out to a thousand endpoints has a thousand), and the
    /// event's endpoints not kept (its `copies` is empty). `None` without
    /// the event; the copy is `None` when it has none.
    pub(crate) fn event_copy(
        &self,
        seq: u64,
        endpoint: &str,
    ) -> Result<Option<(EventRecord, Option<CopyRecord>)>, String> {
        let read = self.db.read();
        let Some(head) = json::<Head>(&read, EVENTS, &seq_key(seq))? else {
            return Ok(None);
        };
        let event = EventRecord {
            app: head.app,
            kind: head.kind,
            created_ms: head.created_ms,
            tenant: head.tenant,
            key: head.key,
            copies: Vec::new(),
        };
        let copy = json(&read, COPIES, &copy_key(seq, endpoint))?;
        Ok(Some((event, copy)))
    }

    /// Endpoint `endpoint`'s copy of event `seq`, read alone.
    pub(crate) fn copy(&self, seq: u64, endpoint: &str) -> Result<Option<CopyRecord>, String> {
        json(&self.db.read(), COPIES, &copy_key(seq, endpoint))
    }

    /// Event `seq`'s payload.
    pub(crate) fn payload(&self, seq: u64) -> Result<Option<Vec<u8>>, String> {
        self.db.read().get(PAYLOADS, &seq_key(seq))
    }

    /// `app`'s events newest first, before `before`, of type `kind` if
    /// given: their sequence numbers and records.
    pub(crate) fn events(
        &self,
        app: &str,
        kind: Option<&str>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, EventRecord)>, String> {
        let read = self.db.read();
        let from = named_key(app, 0);
        let to = named_key(app, before.unwrap_or(u64::MAX));
        let mut items = Vec::new();
        let mut next = None;
        for (scanned, (k, v)) in read.range(BY_APP, &from, Some(&to)).rev().enumerate() {
            let seq = tail_seq(k);
            if scanned == MAX_SCAN {
                next = Some(seq.saturating_add(1));
                break;
            }
            if let Some(t) = kind
                && t.as_bytes() != v.bytes()?.as_slice()
            {
                continue;
            }
            // A full page names a next one only when one more matches: a
            // page that ends the listing says so (no empty page after it).
            if items.len() == limit {
                next = Some(seq.saturating_add(1));
                break;
            }
            if let Some(r) = json(&read, EVENTS, &seq_key(seq))? {
                items.push((seq, r));
            }
        }
        Ok(Page { items, next })
    }

    /// `endpoint`'s copies of application `app`'s events newest first,
    /// before `before`, only the failed ones (`Some(true)`) or the
    /// delivered (`Some(false)`): each with its event's sequence number
    /// and type.
    pub(crate) fn copies_of(
        &self,
        app: &str,
        endpoint: &str,
        failed: Option<bool>,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Page<(u64, String, CopyRecord)>, String> {
        let read = self.db.read();
        let from = named_key(endpoint, 0);
        let to = named_key(endpoint, before.unwrap_or(u64::MAX));
        let mut items = Vec::new();
        let mut next = None;
        for (scanned, (k, _)) in read.range(BY_ENDPOINT, &from, Some(&to)).rev().enumerate() {
            let seq = tail_seq(k);
            if scanned == MAX_SCAN {
                next = Some(seq.saturating_add(1));
                break;
            }
            let Some(copy) = json::<CopyRecord>(&read, COPIES, &copy_key(seq, endpoint))? else {
                continue;
            };
            if !copy.listed(failed) {
                continue;
            }
            // An endpoint of that name under another application once
            // (deleted, made again elsewhere): not this one's history.
            let Some(event) = read
                .get(EVENTS, &seq_key(seq))?
                .and_then(|r| serde_json::from_slice::<EventRecord>(&r).ok())
                .filter(|r| r.app == app)
            else {
                continue;
            };
            // As for events: a next page only when one more is listed.
            if items.len() == limit {
                next = Some(seq.saturating_add(1));
                break;
            }
            items.push((seq, event.kind, copy));
        }
        Ok(Page { items, next })
    }

    /// Every copy not ended: what a restart sends again.
    pub(crate) fn pending(&self) -> Result<Vec<(u64, String)>, String> {
        let read = self.db.read();
        Ok(read
            .range(PENDING, b"", None)
            .map(|(k, _)| {
                let name = String::from_utf8_lossy(&k[8.min(k.len())..]).into_owned();
                (seq_of(k), name)
            })
            .collect())
    }

    /// `endpoint`'s dead-lettered copies of application `app`'s events
    /// from `from` to `to` (sequence numbers), oldest first, at most
    /// `most`: what `recover` sends again, and whether there are more.
    pub(crate) fn dead_lettered(
        &self,
        app: &str,
        endpoint: &str,
        (from, to): (u64, u64),
        most: usize,
    ) -> Result<(Vec<u64>, bool), String> {
        let read = self.db.read();
        let (a, b) = (named_key(endpoint, from), named_key(endpoint, to));
        let mut out = Vec::new();
        for (k, _) in read.range(BY_ENDPOINT, &a, Some(&b)) {
            let seq = tail_seq(k);
            let dead = read
                .get(COPIES, &copy_key(seq, endpoint))?
                .and_then(|r| serde_json::from_slice::<CopyRecord>(&r).ok())
                .is_some_and(|c| c.state == CopyState::DeadLettered);
            let ours = dead
                && read
                    .get(EVENTS, &seq_key(seq))?
                    .and_then(|r| serde_json::from_slice::<EventRecord>(&r).ok())
                    .is_some_and(|r| r.app == app);
            if ours {
                if out.len() == most {
                    return Ok((out, true));
                }
                out.push(seq);
            }
        }
        Ok((out, false))
    }
}
