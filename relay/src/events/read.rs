//! Reading the events store: an event with its copies, an application's
//! events newest first, an endpoint's attempts newest first, the copies
//! still pending (at start), and an endpoint's dead-lettered copies in a
//! window (recover). Each is one read transaction, O(log n + what it
//! returns), never a scan of the store.

use redb::{ReadTransaction, ReadableTable};

use super::record::{CopyRecord, CopyState, EventRecord};
use super::store::{
    BY_APP, BY_ENDPOINT, COPIES, EVENTS, EventStore, PAYLOADS, PENDING, Table, copy_key, named_key,
    seq_key, seq_of,
};

/// The most rows a listing reads to fill one page of a filtered listing
/// (the rest come with its cursor).
const MAX_SCAN: usize = 10_000;

/// One page of a listing, newest first, and the cursor of the next.
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    /// The sequence number to continue before (`None`: the last page).
    pub next: Option<u64>,
}

/// A table opened to read.
type ReadOnly = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// An event with each copy, by endpoint name.
pub(crate) type WithCopies = (EventRecord, Vec<(String, CopyRecord)>);

impl EventStore {
    fn read(&self) -> Result<ReadTransaction, String> {
        self.db.begin_read().map_err(|e| e.to_string())
    }

    /// `table` in `txn`, or `None` if nothing was ever written to it.
    fn table(txn: &ReadTransaction, table: Table) -> Result<Option<ReadOnly>, String> {
        match txn.open_table(table) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Event `seq`, with each copy (by endpoint name).
    pub(crate) fn event(&self, seq: u64) -> Result<Option<WithCopies>, String> {
        let txn = self.read()?;
        let (Some(events), Some(copies)) = (Self::table(&txn, EVENTS)?, Self::table(&txn, COPIES)?)
        else {
            return Ok(None);
        };
        let Some(raw) = events
            .get(seq_key(seq).as_slice())
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let event: EventRecord = serde_json::from_slice(raw.value()).map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(event.copies.len());
        for name in &event.copies {
            if let Some(c) = copies
                .get(copy_key(seq, name).as_slice())
                .map_err(|e| e.to_string())?
            {
                let copy = serde_json::from_slice(c.value()).map_err(|e| e.to_string())?;
                out.push((name.clone(), copy));
            }
        }
        Ok(Some((event, out)))
    }

    /// Event `seq`'s payload.
    pub(crate) fn payload(&self, seq: u64) -> Result<Option<Vec<u8>>, String> {
        let txn = self.read()?;
        let Some(payloads) = Self::table(&txn, PAYLOADS)? else {
            return Ok(None);
        };
        Ok(payloads
            .get(seq_key(seq).as_slice())
            .map_err(|e| e.to_string())?
            .map(|v| v.value().to_vec()))
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
        let txn = self.read()?;
        let (Some(by_app), Some(events)) = (Self::table(&txn, BY_APP)?, Self::table(&txn, EVENTS)?)
        else {
            return Ok(Page {
                items: Vec::new(),
                next: None,
            });
        };
        let from = named_key(app, 0);
        let to = named_key(app, before.unwrap_or(u64::MAX));
        let mut items = Vec::new();
        let mut next = None;
        for (scanned, row) in by_app
            .range(from.as_slice()..to.as_slice())
            .map_err(|e| e.to_string())?
            .rev()
            .enumerate()
        {
            let (k, v) = row.map_err(|e| e.to_string())?;
            let seq = seq_of(&k.value()[k.value().len() - 8..]);
            if items.len() == limit || scanned == MAX_SCAN {
                next = Some(seq.saturating_add(1));
                break;
            }
            if kind.is_some_and(|t| t.as_bytes() != v.value()) {
                continue;
            }
            if let Some(raw) = events
                .get(seq_key(seq).as_slice())
                .map_err(|e| e.to_string())?
            {
                let r = serde_json::from_slice(raw.value()).map_err(|e| e.to_string())?;
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
        let txn = self.read()?;
        let (Some(by_endpoint), Some(copies), Some(events)) = (
            Self::table(&txn, BY_ENDPOINT)?,
            Self::table(&txn, COPIES)?,
            Self::table(&txn, EVENTS)?,
        ) else {
            return Ok(Page {
                items: Vec::new(),
                next: None,
            });
        };
        let from = named_key(endpoint, 0);
        let to = named_key(endpoint, before.unwrap_or(u64::MAX));
        let mut items = Vec::new();
        let mut next = None;
        for (scanned, row) in by_endpoint
            .range(from.as_slice()..to.as_slice())
            .map_err(|e| e.to_string())?
            .rev()
            .enumerate()
        {
            let (k, _) = row.map_err(|e| e.to_string())?;
            let seq = seq_of(&k.value()[k.value().len() - 8..]);
            if items.len() == limit || scanned == MAX_SCAN {
                next = Some(seq.saturating_add(1));
                break;
            }
            let Some(raw) = copies
                .get(copy_key(seq, endpoint).as_slice())
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            let copy: CopyRecord =
                serde_json::from_slice(raw.value()).map_err(|e| e.to_string())?;
            let wanted = match failed {
                None => true,
                Some(true) => copy.failed(),
                Some(false) => copy.state == CopyState::Delivered,
            };
            if !wanted {
                continue;
            }
            // An endpoint of that name under another application once
            // (deleted, made again elsewhere): not this one's history.
            let Some(event) = events
                .get(seq_key(seq).as_slice())
                .map_err(|e| e.to_string())?
                .and_then(|r| serde_json::from_slice::<EventRecord>(r.value()).ok())
                .filter(|r| r.app == app)
            else {
                continue;
            };
            items.push((seq, event.kind, copy));
        }
        Ok(Page { items, next })
    }

    /// Every copy not ended: what a restart sends again.
    pub(crate) fn pending(&self) -> Result<Vec<(u64, String)>, String> {
        let txn = self.read()?;
        let Some(pending) = Self::table(&txn, PENDING)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in pending.iter().map_err(|e| e.to_string())? {
            let (k, _) = row.map_err(|e| e.to_string())?;
            let k = k.value();
            let name = String::from_utf8_lossy(&k[8.min(k.len())..]).into_owned();
            out.push((seq_of(k), name));
        }
        Ok(out)
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
        let txn = self.read()?;
        let (Some(by_endpoint), Some(copies), Some(events)) = (
            Self::table(&txn, BY_ENDPOINT)?,
            Self::table(&txn, COPIES)?,
            Self::table(&txn, EVENTS)?,
        ) else {
            return Ok((Vec::new(), false));
        };
        let (a, b) = (named_key(endpoint, from), named_key(endpoint, to));
        let mut out = Vec::new();
        for row in by_endpoint
            .range(a.as_slice()..b.as_slice())
            .map_err(|e| e.to_string())?
        {
            let (k, _) = row.map_err(|e| e.to_string())?;
            let seq = seq_of(&k.value()[k.value().len() - 8..]);
            let dead = copies
                .get(copy_key(seq, endpoint).as_slice())
                .map_err(|e| e.to_string())?
                .and_then(|r| serde_json::from_slice::<CopyRecord>(r.value()).ok())
                .is_some_and(|c| c.state == CopyState::DeadLettered);
            let ours = dead
                && events
                    .get(seq_key(seq).as_slice())
                    .map_err(|e| e.to_string())?
                    .and_then(|r| serde_json::from_slice::<EventRecord>(r.value()).ok())
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
