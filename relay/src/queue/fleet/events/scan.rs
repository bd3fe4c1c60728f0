//! An application's events newest first, a batch at a time from Redis:
//! what the fleet's listings page through.

use super::super::redis::events::RedisEvents;
use crate::events::record::EventRecord;

/// An application's events newest first, read a batch at a time: what a
/// listing pages through.
pub(super) struct Scan<'a> {
    events: &'a RedisEvents,
    app: &'a str,
    cursor: Option<u64>,
    batch: std::vec::IntoIter<(u64, Option<EventRecord>)>,
    last: bool,
    /// Events handed out so far.
    pub(super) scanned: usize,
}

impl<'a> Scan<'a> {
    /// `app`'s events before `before` (`None`: from the newest).
    pub(super) fn new(events: &'a RedisEvents, app: &'a str, before: Option<u64>) -> Scan<'a> {
        Scan {
            events,
            app,
            cursor: before,
            batch: Vec::new().into_iter(),
            last: false,
            scanned: 0,
        }
    }

    /// The next event still kept, newest first (`None`: no more).
    pub(super) async fn next(&mut self) -> Result<Option<(u64, EventRecord)>, String> {
        loop {
            if let Some((id, record)) = self.batch.next() {
                self.cursor = Some(id);
                if let Some(r) = record {
                    self.scanned += 1;
                    return Ok(Some((id, r)));
                }
                continue;
            }
            if self.last {
                return Ok(None);
            }
            let err = |e: dripfeed::global::RedisError| e.to_string();
            let ids = self
                .events
                .newest(self.app, self.cursor, 256)
                .await
                .map_err(err)?;
            let records = self.events.records(self.app, &ids).await.map_err(err)?;
            self.last = ids.len() < 256;
            self.batch = ids.into_iter().zip(records).collect::<Vec<_>>().into_iter();
        }
    }
}
