//! The events store: `events.kv` beside the journal (in memory without
//! one; [`Kv`]: its keys in memory, its values on disk). Each event is written with every copy it fans out to in one
//! transaction, durable (fsynced) before its 202: a crash never leaves
//! half a fan-out, and a copy is never in the journal (it is submitted
//! unjournaled) but here, where a restart finds it pending and sends it
//! again. Each attempt and each copy's end are written here too; those
//! arriving together share a transaction (a batch with an event or a
//! copy's end is fsynced, one of attempts alone is not: a crash may lose
//! the last attempts' records, never an event or a copy's end).
//!
//! Tables (keys are bytes: a sequence number is 8 bytes big-endian, so the
//! keys' order is time order):
//!
//! - `events`: seq → the [`EventRecord`] (JSON); `payloads`: seq → bytes;
//! - `copies`: seq ‖ endpoint → the [`CopyRecord`] (JSON);
//! - `by_endpoint`: endpoint ‖ 0 ‖ seq → (); `by_app`: app ‖ 0 ‖ seq → type;
//! - `pending`: seq ‖ endpoint → (), the copies not ended;
//! - `keys`: app ‖ 0 ‖ `Idempotency-Key` scoped by tenant → seq.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::record::{CopyRecord, CopyState, EventRecord, MAX_ATTEMPTS, STOPPED, Told};
use crate::util::kv::{Kv, Table, Tx};

pub(super) const EVENTS: Table = 0;
pub(super) const PAYLOADS: Table = 1;
pub(super) const COPIES: Table = 2;
pub(super) const BY_ENDPOINT: Table = 3;
pub(super) const BY_APP: Table = 4;
pub(super) const PENDING: Table = 5;
pub(super) const KEYS: Table = 6;
const TABLES: usize = 7;

/// The store's file in the journal's directory.
pub(crate) const FILE: &str = "events.kv";

/// `seq` as a key.
pub(super) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// A key's sequence number (its first or last 8 bytes).
pub(super) fn seq_of(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    if bytes.len() >= 8 {
        b.copy_from_slice(&bytes[..8]);
    }
    u64::from_be_bytes(b)
}

/// `name ‖ 0 ‖ seq`.
pub(super) fn named_key(name: &str, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 9);
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq_key(seq));
    k
}

/// `seq ‖ endpoint`.
pub(super) fn copy_key(seq: u64, endpoint: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + endpoint.len());
    k.extend_from_slice(&seq_key(seq));
    k.extend_from_slice(endpoint.as_bytes());
    k
}

/// `app ‖ 0 ‖ key` (the key as the record holds it: scoped by tenant).
fn idempotency(app: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(app.len() + 1 + key.len());
    k.extend_from_slice(app.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// What a post found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Written.
    New,
    /// Its `Idempotency-Key` was taken before: that event, and how many
    /// copies it made.
    Duplicate { seq: u64, copies: usize },
    /// Its `Idempotency-Key` was taken before by an event of another type
    /// or payload: nothing written.
    Reused,
}

/// One write for the writer thread.
enum Op {
    Post {
        seq: u64,
        event: EventRecord,
        payload: axum::body::Bytes,
        /// The application's first id ([`App::since`](crate::catalog::App)):
        /// a key naming an earlier event is an earlier application's.
        since: u64,
        done: oneshot::Sender<Result<Posted, String>>,
    },
    Tell {
        seq: u64,
        endpoint: Arc<str>,
        told: Told,
    },
    Sweep {
        from_seq: u64,
        before_seq: u64,
        most: usize,
        done: oneshot::Sender<Result<(usize, Option<u64>), String>>,
    },
    Again {
        seqs: Vec<u64>,
        endpoint: Arc<str>,
        done: oneshot::Sender<Result<Vec<u64>, String>>,
    },
    Size {
        done: oneshot::Sender<Result<u64, String>>,
    },
    /// Answered once everything sent before it is durable.
    Durable {
        done: oneshot::Sender<Result<(), String>>,
    },
}

impl Op {
    /// Whether its batch must be fsynced before the writer answers.
    fn durable(&self) -> bool {
        match self {
            Op::Post { .. } | Op::Sweep { .. } | Op::Again { .. } | Op::Durable { .. } => true,
            Op::Size { .. } => false,
            Op::Tell { told, .. } => !matches!(told, Told::Attempt { ended: None, .. }),
        }
    }
}

/// The events store (see the [module](self) docs).
pub(crate) struct EventStore {
    pub(super) db: Arc<Kv>,
    writes: Option<mpsc::Sender<Op>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl EventStore {
    /// Opens (or makes) the store in `dir`, owner-only; in memory without
    /// a directory.
    pub(crate) fn open(dir: Option<&Path>) -> Result<EventStore, String> {
        let db = match dir {
            Some(dir) => Kv::open(&dir.join(FILE), TABLES).map_err(|e| format!("events {e}"))?,
            None => Kv::memory(TABLES),
        };
        let db = Arc::new(db);
        let (tx, rx) = mpsc::channel();
        let written = db.clone();
        let writer = std::thread::Builder::new()
            .name("dripfeed-events".into())
            .spawn(move || writer(&written, &rx))
            .map_err(|e| format!("events: {e}"))?;
        Ok(EventStore {
            db,
            writes: Some(tx),
            writer: Some(writer),
        })
    }

    fn send(&self, op: Op) -> bool {
        self.writes.as_ref().is_some_and(|w| w.send(op).is_ok())
    }

    /// Writes event `seq` with its payload and every copy (pending), or
    /// finds its `Idempotency-Key` taken; durable before it answers.
    pub(crate) async fn post(
        &self,
        seq: u64,
        event: EventRecord,
        payload: axum::body::Bytes,
        since: u64,
    ) -> Result<Posted, String> {
        self.ask(|done| Op::Post {
            seq,
            event,
            payload,
            since,
            done,
        })
        .await
    }

    /// Whether it is kept on disk: a copy left pending in it is sent by
    /// the next start (in memory, it would be lost with the process).
    pub(crate) fn kept(&self) -> bool {
        self.db.on_disk()
    }

    /// Records what happened to endpoint's copy of event `seq` (not
    /// awaited: see the [module](self) docs for what a crash may lose).
    pub(crate) fn tell(&self, seq: u64, endpoint: Arc<str>, told: Told) {
        if !self.send(Op::Tell {
            seq,
            endpoint,
            told,
        }) {
            tracing::warn!(
                event = seq,
                "the events store's writer has stopped: a copy's attempt is not recorded"
            );
        }
    }

    /// Looks at (at most `most` of) the events from `from_seq` and before
    /// `before_seq`, oldest first, and deletes those whose copies have all
    /// ended: how many went, and where to go on (`None`: none left).
    pub(crate) async fn sweep(
        &self,
        from_seq: u64,
        before_seq: u64,
        most: usize,
    ) -> Result<(usize, Option<u64>), String> {
        self.ask(|done| Op::Sweep {
            from_seq,
            before_seq,
            most,
            done,
        })
        .await
    }

    /// Marks `endpoint`'s copies of events `seqs` to be sent again, each
    /// only if it has ended (delivered or dead-lettered): those it marked,
    /// durable before the answer. Two resends of one copy at once send it
    /// once.
    pub(crate) async fn again(
        &self,
        seqs: Vec<u64>,
        endpoint: Arc<str>,
    ) -> Result<Vec<u64>, String> {
        self.ask(|done| Op::Again {
            seqs,
            endpoint,
            done,
        })
        .await
    }

    /// Blocks (a thread outside the runtime: the dead-letter writer's)
    /// until everything told before is durable, so a copy's end is in the
    /// store before its dead letter is in the file: a crash between the
    /// two leaves the copy ended here (`recover` finds it), never pending
    /// with a letter already written (the next start sent it again, and a
    /// second letter made a redrive deliver it twice).
    pub(crate) fn durable_blocking(&self) -> Result<(), String> {
        const STOPPED: &str = "the events store's writer has stopped";
        let (done, answer) = oneshot::channel();
        if !self.send(Op::Durable { done }) {
            return Err(STOPPED.into());
        }
        answer
            .blocking_recv()
            .unwrap_or_else(|_| Err(STOPPED.into()))
    }

    /// The bytes the store holds (its live keys and values, not its
    /// file's size).
    pub(crate) async fn stored_bytes(&self) -> Result<u64, String> {
        self.ask(|done| Op::Size { done }).await
    }

    /// Sends the writer the op `make` builds around its answer's sender,
    /// and waits for the answer.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Op,
    ) -> Result<T, String> {
        const STOPPED: &str = "the events store's writer has stopped";
        let (done, answer) = oneshot::channel();
        if !self.send(make(done)) {
            return Err(STOPPED.into());
        }
        answer.await.map_err(|_| STOPPED.to_owned())?
    }
}

/// The writer ends once every write sent is committed.
impl Drop for EventStore {
    fn drop(&mut self) {
        drop(self.writes.take());
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Takes every write waiting, applies them in one transaction, answers.
fn writer(db: &Kv, rx: &mpsc::Receiver<Op>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 4096
            && let Ok(more) = rx.try_recv()
        {
            batch.push(more);
        }
        let durable = batch.iter().any(Op::durable);
        let answers = commit(db, &mut batch, durable);
        let size = batch
            .iter()
            .any(|op| matches!(op, Op::Size { .. }))
            .then(|| Ok(db.live_bytes()));
        for (op, answer) in batch.into_iter().zip(answers) {
            match op {
                Op::Post { done, .. } => {
                    let _ = done.send(answer.map(|a| match a {
                        Some(Done::Posted(p)) => p,
                        _ => Posted::New,
                    }));
                }
                Op::Sweep { done, .. } => {
                    let _ = done.send(answer.map(|a| match a {
                        Some(Done::Swept { swept, next }) => (swept, next),
                        _ => (0, None),
                    }));
                }
                Op::Again { done, .. } => {
                    let _ = done.send(answer.map(|a| match a {
                        Some(Done::Granted(seqs)) => seqs,
                        _ => Vec::new(),
                    }));
                }
                Op::Size { done } => {
                    let _ = done.send(size.clone().unwrap_or_else(|| Err("not read".into())));
                }
                Op::Durable { done } => {
                    let _ = done.send(answer.map(|_| ()));
                }
                Op::Tell { .. } => {}
            }
        }
    }
}

/// What one op's apply gives its caller.
enum Done {
    Posted(Posted),
    Swept { swept: usize, next: Option<u64> },
    Granted(Vec<u64>),
}

type Answer = Result<Option<Done>, String>;

/// `batch` in one transaction: each op's answer (a failed commit fails
/// them all).
fn commit(db: &Kv, batch: &mut [Op], durable: bool) -> Vec<Answer> {
    let mut t = Tables { tx: db.write() };
    let answers: Vec<Answer> = batch.iter().map(|op| t.apply(op)).collect();
    match t.tx.commit(durable) {
        Ok(()) => answers,
        Err(e) => {
            tracing::error!(error = %e, "the events store cannot write");
            batch.iter().map(|_| Err(e.clone())).collect()
        }
    }
}

/// One write transaction over the tables.
struct Tables<'t> {
    tx: Tx<'t>,
}

impl Tables<'_> {
    /// The record `table` holds at `key`, read as JSON (`None`: none, or
    /// one that does not read).
    fn json<T: serde::de::DeserializeOwned>(
        &self,
        table: Table,
        key: &[u8],
    ) -> Result<Option<T>, String> {
        Ok(self
            .tx
            .get(table, key)?
            .and_then(|v| serde_json::from_slice(&v).ok()))
    }

    fn apply(&mut self, op: &Op) -> Answer {
        let tx = &mut self.tx;
        match op {
            Op::Post {
                seq,
                event,
                payload,
                since,
                ..
            } => {
                if let Some(key) = &event.key {
                    let k = idempotency(&event.app, key);
                    // A key an application deleted since used names an
                    // event of that one: taken again, as new.
                    if let Some(had) = tx.get(KEYS, &k)?.map(|had| seq_of(&had))
                        && had >= *since
                    {
                        let first = self.json::<EventRecord>(EVENTS, &seq_key(had))?;
                        let same = match &first {
                            Some(r) => {
                                r.kind == event.kind
                                    && self.tx.get(PAYLOADS, &seq_key(had))?.as_deref()
                                        == Some(&payload[..])
                            }
                            None => true,
                        };
                        if !same {
                            return Ok(Some(Done::Posted(Posted::Reused)));
                        }
                        let copies = first.map_or(0, |r| r.copies.len());
                        return Ok(Some(Done::Posted(Posted::Duplicate { seq: had, copies })));
                    }
                    tx.insert(KEYS, &k, &seq_key(*seq));
                }
                let record = serde_json::to_vec(event).map_err(|x| x.to_string())?;
                let sk = seq_key(*seq);
                tx.insert(EVENTS, &sk, &record);
                tx.insert(PAYLOADS, &sk, &payload[..]);
                tx.insert(BY_APP, &named_key(&event.app, *seq), event.kind.as_bytes());
                let pending =
                    serde_json::to_vec(&CopyRecord::pending()).map_err(|x| x.to_string())?;
                for name in &event.copies {
                    let ck = copy_key(*seq, name);
                    tx.insert(COPIES, &ck, &pending);
                    tx.insert(PENDING, &ck, &[]);
                    tx.insert(BY_ENDPOINT, &named_key(name, *seq), &[]);
                }
                Ok(None)
            }
            Op::Tell {
                seq,
                endpoint,
                told,
            } => {
                let ck = copy_key(*seq, endpoint);
                let Some(mut copy) = self.json::<CopyRecord>(COPIES, &ck)? else {
                    return Ok(None); // swept meanwhile
                };
                match told {
                    Told::Attempt {
                        attempt,
                        ended,
                        retry_at_ms,
                    } => {
                        let stopped = attempt.error.as_deref() == Some(STOPPED);
                        copy.count_attempt(!stopped);
                        copy.retry_at_ms = *retry_at_ms;
                        copy.attempts.push(attempt.clone());
                        if copy.attempts.len() > MAX_ATTEMPTS {
                            copy.attempts.remove(0);
                        }
                        if let Some(state) = ended {
                            copy.state = *state;
                        }
                    }
                    Told::DeadLettered(reason) | Told::Lettering(reason) => {
                        copy.state = CopyState::DeadLettered;
                        copy.reason = Some(reason.clone());
                    }
                    Told::Lettered => {
                        // Its letter is written: no longer awaited.
                        if copy.state != CopyState::Pending {
                            self.tx.remove(PENDING, &ck);
                        }
                        return Ok(None);
                    }
                }
                let bytes = serde_json::to_vec(&copy).map_err(|x| x.to_string())?;
                let tx = &mut self.tx;
                tx.insert(COPIES, &ck, &bytes);
                match (copy.state, told) {
                    // Pending, or awaiting its letter: what a restart sees.
                    (CopyState::Pending, _) | (_, Told::Lettering(_)) => {
                        tx.insert(PENDING, &ck, &[]);
                    }
                    _ => {
                        tx.remove(PENDING, &ck);
                    }
                }
                Ok(None)
            }
            Op::Size { .. } | Op::Durable { .. } => Ok(None),
            Op::Again { seqs, endpoint, .. } => {
                let mut granted = Vec::with_capacity(seqs.len());
                for seq in seqs {
                    let ck = copy_key(*seq, endpoint);
                    let Some(mut copy) = self.json::<CopyRecord>(COPIES, &ck)? else {
                        continue; // swept meanwhile
                    };
                    if copy.state == CopyState::Pending {
                        continue; // on its way already
                    }
                    copy.state = CopyState::Pending;
                    copy.reason = None;
                    copy.resent = copy.resent.saturating_add(1);
                    copy.begin_round();
                    let bytes = serde_json::to_vec(&copy).map_err(|x| x.to_string())?;
                    self.tx.insert(COPIES, &ck, &bytes);
                    self.tx.insert(PENDING, &ck, &[]);
                    granted.push(*seq);
                }
                Ok(Some(Done::Granted(granted)))
            }
            Op::Sweep {
                from_seq,
                before_seq,
                most,
                ..
            } => {
                let rows = tx.range(EVENTS, &seq_key(*from_seq), &seq_key(*before_seq), *most)?;
                let looked = rows.len();
                let last = rows.last().map(|(k, _)| seq_of(k));
                let gone: Vec<(u64, EventRecord)> = rows
                    .into_iter()
                    .filter_map(|(k, v)| Some((seq_of(&k), serde_json::from_slice(&v).ok()?)))
                    .collect();
                // Looked at `most`: there may be more after the last.
                let next = last
                    .filter(|_| looked >= *most)
                    .map(|l: u64| l.saturating_add(1));
                let mut swept = 0;
                for (seq, r) in gone {
                    let held = r.copies.iter().any(|n| tx.has(PENDING, &copy_key(seq, n)));
                    if held {
                        continue; // a copy still on its way is kept, and its event
                    }
                    let sk = seq_key(seq);
                    tx.remove(EVENTS, &sk);
                    tx.remove(PAYLOADS, &sk);
                    tx.remove(BY_APP, &named_key(&r.app, seq));
                    if let Some(key) = &r.key {
                        let k = idempotency(&r.app, key);
                        let ours = tx.get(KEYS, &k)?.is_some_and(|v| seq_of(&v) == seq);
                        if ours {
                            tx.remove(KEYS, &k);
                        }
                    }
                    for n in &r.copies {
                        tx.remove(COPIES, &copy_key(seq, n));
                        tx.remove(BY_ENDPOINT, &named_key(n, seq));
                    }
                    swept += 1;
                }
                Ok(Some(Done::Swept { swept, next }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::EventStore;
    use crate::events::record::{CopyState, EventRecord, Told};

    fn event(copies: &[&str]) -> EventRecord {
        EventRecord {
            app: "acme".into(),
            kind: "thing.done".into(),
            created_ms: 0,
            tenant: None,
            key: None,
            copies: copies.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    #[tokio::test]
    async fn one_copy_is_read_alone_with_its_event() {
        let store = Arc::new(EventStore::open(None).unwrap());
        store
            .post(7, event(&["a", "b", "c"]), "{}".into(), 0)
            .await
            .unwrap();
        store.tell(7, "b".into(), Told::DeadLettered("overflow".into()));
        let written = store.clone();
        tokio::task::spawn_blocking(move || written.durable_blocking())
            .await
            .unwrap()
            .unwrap();
        let (whole, _) = store.event(7).unwrap().unwrap();
        let (head, copy) = store.event_copy(7, "b").unwrap().unwrap();
        assert_eq!(
            (head.app.as_str(), head.kind.as_str(), head.created_ms),
            (whole.app.as_str(), whole.kind.as_str(), whole.created_ms)
        );
        assert!(head.copies.is_empty(), "the endpoints' names not kept");
        assert_eq!(copy.map(|c| c.state), Some(CopyState::DeadLettered));
        assert_eq!(
            store.copy(7, "a").unwrap().map(|c| c.state),
            Some(CopyState::Pending)
        );
        assert!(store.copy(7, "z").unwrap().is_none(), "no copy of it");
        assert!(store.event_copy(8, "a").unwrap().is_none(), "no such event");
    }

    #[tokio::test]
    async fn a_copy_awaiting_its_letter_stays_pending_until_it_is_written() {
        let store = Arc::new(EventStore::open(None).unwrap());
        store
            .post(5, event(&["a", "b"]), "{}".into(), 0)
            .await
            .unwrap();
        let sync = |store: Arc<EventStore>| async move {
            tokio::task::spawn_blocking(move || store.durable_blocking())
                .await
                .unwrap()
                .unwrap();
        };
        // a: dead-lettered, its letter on its way; b: dead-lettered by a
        // letter already written (a redrive refused).
        store.tell(5, "a".into(), Told::Lettering("overflow".into()));
        store.tell(5, "b".into(), Told::DeadLettered("overflow".into()));
        sync(store.clone()).await;
        // What a restart sees: a, to letter (its state says so), not b.
        assert_eq!(store.pending().unwrap(), vec![(5, "a".to_owned())]);
        let (_, copies) = store.event(5).unwrap().unwrap();
        assert!(
            copies
                .iter()
                .all(|(_, c)| c.state == CopyState::DeadLettered)
        );
        store.tell(5, "a".into(), Told::Lettered);
        sync(store.clone()).await;
        assert!(store.pending().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_filtered_listing_names_a_next_page_only_when_one_more_matches() {
        let store = EventStore::open(None).unwrap();
        for seq in 1..=9u64 {
            let kind = if seq >= 6 { "odd.one" } else { "thing.done" };
            let r = EventRecord {
                kind: kind.into(),
                ..event(&[])
            };
            store.post(seq, r, "{}".into(), 0).await.unwrap();
        }
        // Four of type odd.one (6..=9), newest first, two a page: the
        // second page ends the listing, though older events of another
        // type follow it.
        let first = store.events("acme", Some("odd.one"), None, 2).unwrap();
        let seqs: Vec<u64> = first.items.iter().map(|(s, _)| *s).collect();
        assert_eq!((seqs, first.next), (vec![9, 8], Some(8)));
        let second = store
            .events("acme", Some("odd.one"), first.next, 2)
            .unwrap();
        let seqs: Vec<u64> = second.items.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            (seqs, second.next),
            (vec![7, 6], None),
            "no empty page after"
        );
        // Unfiltered, an exact last page says so too.
        let all = store.events("acme", None, Some(3), 2).unwrap();
        assert_eq!((all.items.len(), all.next), (2, None));
    }

    #[tokio::test]
    async fn a_key_is_its_applications_not_an_earlier_ones_of_the_name() {
        use super::Posted;
        let store = EventStore::open(None).unwrap();
        let keyed = || EventRecord {
            key: Some("invoice-1".into()),
            ..event(&["a"])
        };
        assert_eq!(
            store.post(5, keyed(), "{}".into(), 0).await,
            Ok(Posted::New)
        );
        let again = store.post(6, keyed(), "{}".into(), 0).await;
        assert_eq!(again, Ok(Posted::Duplicate { seq: 5, copies: 1 }));
        // The application made again from id 7 on: the key is taken anew,
        // and then names the new event.
        assert_eq!(
            store.post(8, keyed(), "{}".into(), 7).await,
            Ok(Posted::New)
        );
        let again = store.post(9, keyed(), "{}".into(), 7).await;
        assert_eq!(again, Ok(Posted::Duplicate { seq: 8, copies: 1 }));
    }

    #[tokio::test]
    async fn a_copy_is_sent_again_once_and_only_once_it_has_ended() {
        let store = EventStore::open(None).unwrap();
        store.post(1, event(&["a"]), "{}".into(), 0).await.unwrap();
        let a: Arc<str> = Arc::from("a");
        assert!(
            store.again(vec![1], a.clone()).await.unwrap().is_empty(),
            "pending"
        );
        store.tell(1, a.clone(), Told::DeadLettered("overflow".into()));
        // Two at once: one is granted, the other finds it pending.
        let (x, y) = tokio::join!(
            store.again(vec![1], a.clone()),
            store.again(vec![1], a.clone())
        );
        let granted = x.unwrap().len() + y.unwrap().len();
        assert_eq!(granted, 1);
        let (_, copies) = store.event(1).unwrap().unwrap();
        assert_eq!(copies[0].1.state, CopyState::Pending);
        assert_eq!(copies[0].1.resent, 1);
    }

    #[tokio::test]
    async fn the_sweep_walks_past_an_event_still_on_its_way() {
        let store = EventStore::open(None).unwrap();
        store
            .post(1, event(&["slow"]), "{}".into(), 0)
            .await
            .unwrap();
        store
            .post(2, event(&["fast"]), "{}".into(), 0)
            .await
            .unwrap();
        store.tell(2, Arc::from("fast"), Told::DeadLettered("overflow".into()));
        // One at a time: the first is held (pending), the walk goes on.
        let (swept, next) = store.sweep(0, u64::MAX, 1).await.unwrap();
        assert_eq!((swept, next), (0, Some(2)));
        let (swept, _) = store.sweep(2, u64::MAX, 1).await.unwrap();
        assert_eq!(swept, 1);
        assert!(store.event(1).unwrap().is_some(), "kept while on its way");
        assert!(store.event(2).unwrap().is_none(), "swept");
    }
}
