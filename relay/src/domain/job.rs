//! A queued webhook, and its encoding in the journal.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use dripfeed::journal::{DecodeError, JobCodec};

use super::budget::Ticket;
use crate::domain::trace_context::{ENCODED_LEN, TraceContext};

/// A queued webhook: its [`Fields`], boxed, so a ring's slot holds a
/// pointer, 48 bytes with its stamps (a destination's ring is sized for
/// its ceiling: at 200/s and a 2 s budget, 400 slots of 232 bytes each
/// were 93 KiB a destination with work). Its fields are read and set through it.
pub struct Job(Box<Fields>);

impl std::ops::Deref for Job {
    type Target = Fields;
    fn deref(&self) -> &Fields {
        &self.0
    }
}

impl std::ops::DerefMut for Job {
    fn deref_mut(&mut self) -> &mut Fields {
        &mut self.0
    }
}

/// What a queued webhook is. Its ticket holds its bytes against the byte
/// budget until dropped; a webhook recovered from the journal has none
/// (the journal's own bound holds it).
pub struct Fields {
    /// The body, delivered as it came.
    pub body: Bytes,
    /// Its `Content-Type`, delivered with it.
    pub content_type: Option<String>,
    /// The tenant that sent it, if tenants are named.
    pub tenant: Option<String>,
    /// When the relay received it, ms since the Unix epoch.
    pub received_unix_ms: u64,
    /// The destination a request named (set at intake).
    pub destination: Option<Arc<str>>,
    /// The id a redriven webhook had before (its receiver may have
    /// deduplicated on it): its deliveries carry it instead of the new one.
    pub redrive_id: Option<u64>,
    /// What its deliveries did, shared with intake (which learns its id).
    pub trail: Arc<Trail>,
    /// Its trace: the intake span its delivery attempts join (with traces
    /// exported; kept in the journal and the fleet's queue).
    pub trace: Option<TraceContext>,
    /// An event's copy for one endpoint: its event, where it reports
    /// (never journaled: the events store keeps it).
    pub(crate) event: Option<Arc<crate::domain::event_copy::EventCopy>>,
    /// An event's copy read back from a record (the fleet's queue): its
    /// application and type, made an [`event`](Self::event) by the engine
    /// that delivers it.
    pub(crate) event_of: Option<Arc<EventOf>>,
    _ticket: Option<Ticket>,
}

/// The event a copy read back from a record belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventOf {
    /// Its application.
    pub app: Arc<str>,
    /// Its type.
    pub kind: Arc<str>,
}

/// A webhook's attempts so far: its public id (0 before it is known), how
/// many attempts, the receiver's last status (0: no answer), and the
/// destination that tried it (a recovered webhook learns it here).
#[derive(Default)]
pub struct Trail {
    id: AtomicU64,
    attempts: AtomicU32,
    last_status: AtomicU32,
    destination: OnceLock<Arc<str>>,
    error: Mutex<Option<Arc<str>>>,
}

impl Trail {
    /// The id its receiver sees; 0 before admission names it.
    pub fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    /// Names it `id` unless it already has an id; returns the id it has.
    pub fn name(&self, id: u64) -> u64 {
        match self
            .id
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => id,
            Err(had) => had,
        }
    }

    /// Attempts made.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// The receiver's last status (0: no answer).
    pub fn last_status(&self) -> u32 {
        self.last_status.load(Ordering::Relaxed)
    }

    /// Records an attempt's number and the receiver's answer.
    pub fn attempted(&self, number: u32, status: u16) {
        self.attempts.store(number, Ordering::Relaxed);
        self.last_status.store(u32::from(status), Ordering::Relaxed);
    }

    /// The destination that tried it, if any did.
    pub fn destination(&self) -> Option<&Arc<str>> {
        self.destination.get()
    }

    /// Its last failed attempt's error (`kind: message`), if one failed:
    /// the dead-letter line's `error`.
    pub fn last_error(&self) -> Option<Arc<str>> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Notes an attempt's error.
    pub fn failed(&self, error: &str) {
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::from(error));
    }

    /// Notes the destination trying it.
    pub fn tried_by(&self, name: &Arc<str>) {
        let _ = self.destination.set(name.clone());
    }
}

/// Now, in ms since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Job {
    /// A webhook just received, holding `ticket` against the byte budget.
    pub fn new(
        body: Bytes,
        content_type: Option<String>,
        tenant: Option<String>,
        destination: Arc<str>,
        ticket: Ticket,
    ) -> Job {
        Job(Box::new(Fields {
            body,
            content_type,
            tenant,
            received_unix_ms: unix_ms(),
            destination: Some(destination),
            redrive_id: None,
            trail: Arc::default(),
            trace: None,
            event: None,
            event_of: None,
            _ticket: Some(ticket),
        }))
    }

    /// Endpoint's copy of an event: its payload (shared by every copy),
    /// named by the event's id, its bytes held by the event (`copy`).
    pub(crate) fn copy(payload: Bytes, copy: Arc<crate::domain::event_copy::EventCopy>) -> Job {
        let trail = Trail::default();
        trail.name(copy.seq);
        Job(Box::new(Fields {
            body: payload,
            content_type: Some("application/json".to_owned()),
            tenant: copy.tenant.clone(),
            received_unix_ms: copy.created_ms,
            destination: Some(copy.endpoint.clone()),
            redrive_id: None,
            trail: Arc::new(trail),
            trace: None,
            event: Some(copy),
            event_of: None,
            _ticket: None,
        }))
    }

    /// A webhook whose record could not be read: its bytes kept as the
    /// body, to be dead-lettered as they are.
    pub fn raw(bytes: Bytes) -> Job {
        Job(Box::new(Fields {
            body: bytes,
            content_type: None,
            tenant: None,
            received_unix_ms: unix_ms(),
            destination: None,
            redrive_id: None,
            trail: Arc::default(),
            trace: None,
            event: None,
            event_of: None,
            _ticket: None,
        }))
    }

    /// A webhook re-admitted from a dead-letter line (`--redrive`) under
    /// the id it had, holding its bytes against the budget like a new one.
    pub fn redriven(
        body: Bytes,
        content_type: Option<String>,
        tenant: Option<String>,
        received_unix_ms: u64,
        id: Option<u64>,
        ticket: Ticket,
    ) -> Job {
        let trail = Trail::default();
        if let Some(id) = id {
            trail.name(id);
        }
        Job(Box::new(Fields {
            body,
            content_type,
            tenant,
            received_unix_ms,
            destination: None,
            redrive_id: id,
            trail: Arc::new(trail),
            trace: None,
            event: None,
            event_of: None,
            _ticket: Some(ticket),
        }))
    }

    /// The destination it names, or the one that tried it.
    pub fn destination_name(&self) -> Option<&str> {
        self.destination
            .as_deref()
            .or(self.trail.destination().map(|d| &**d))
    }
}

/// Marks a record that carries a redriven webhook's earlier id (a
/// receive time is kept below the markers: [`LATEST`]).
const WITH_ID: u64 = u64::MAX;
/// Marks a record that carries the webhook's trace context: then
/// [`OLD_READERS`] and the 25 bytes.
const WITH_TRACE: u64 = u64::MAX - 1;
/// Marks a record of an event's copy: then [`OLD_READERS`], its
/// application and its type (length-prefixed).
const WITH_EVENT: u64 = u64::MAX - 2;
/// Written after [`WITH_TRACE`] and [`WITH_EVENT`]: a relay that does not know the marker
/// reads it as a content type's length no record can hold, and refuses
/// the record the same way whatever the trace id (which a sender chose).
const OLD_READERS: [u8; 4] = (u32::MAX - 1).to_le_bytes();
/// The latest receive time a record keeps: the values above are markers
/// (a redriven dead-letter line's time comes from the line).
const LATEST: u64 = WITH_EVENT - 1;

/// The journal's encoding: the receive time, the content type and tenant
/// (length-prefixed, absent = `u32::MAX`), then the body. A traced
/// webhook's record starts with `u64::MAX - 1` and its trace context, an
/// event's copy's then with `u64::MAX - 2`, its application and type, a
/// redriven one's then with `u64::MAX` and its earlier id; records without
/// them read as before.
impl JobCodec for Job {
    fn encode(&self, out: &mut Vec<u8>) {
        if let Some(trace) = &self.trace {
            out.extend_from_slice(&WITH_TRACE.to_le_bytes());
            out.extend_from_slice(&OLD_READERS);
            out.extend_from_slice(&trace.to_bytes());
        }
        let of = self.event.as_ref().map(|e| (&e.app, &e.kind));
        if let Some((app, kind)) = of.or(self.event_of.as_ref().map(|e| (&e.app, &e.kind))) {
            out.extend_from_slice(&WITH_EVENT.to_le_bytes());
            out.extend_from_slice(&OLD_READERS);
            for s in [app, kind] {
                // Names and types are short (checked at intake).
                let len = u32::try_from(s.len()).unwrap_or(u32::MAX - 1);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&s.as_bytes()[..len as usize]);
            }
        }
        if let Some(id) = self.redrive_id {
            out.extend_from_slice(&WITH_ID.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend_from_slice(&self.received_unix_ms.min(LATEST).to_le_bytes());
        for field in [&self.content_type, &self.tenant] {
            match field {
                Some(s) => {
                    let len = u32::try_from(s.len()).unwrap_or(u32::MAX - 1);
                    out.extend_from_slice(&len.to_le_bytes());
                    out.extend_from_slice(&s.as_bytes()[..len as usize]);
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
        out.extend_from_slice(&self.body);
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let short = || DecodeError::new("a webhook record cut short");
        let (mut first, mut rest) = bytes.split_first_chunk::<8>().ok_or_else(short)?;
        let mut trace = None;
        if u64::from_le_bytes(*first) == WITH_TRACE {
            let (_, after) = rest.split_first_chunk::<4>().ok_or_else(short)?;
            let (context, after) = after.split_first_chunk::<ENCODED_LEN>().ok_or_else(short)?;
            trace = Some(TraceContext::from_bytes(context));
            (first, rest) = after.split_first_chunk::<8>().ok_or_else(short)?;
        }
        let mut event_of = None;
        if u64::from_le_bytes(*first) == WITH_EVENT {
            let (_, mut after) = rest.split_first_chunk::<4>().ok_or_else(short)?;
            let mut name = || -> Result<Arc<str>, DecodeError> {
                let (len, tail) = after.split_first_chunk::<4>().ok_or_else(short)?;
                let len = u32::from_le_bytes(*len) as usize;
                let (s, tail) = tail.split_at_checked(len).ok_or_else(short)?;
                after = tail;
                std::str::from_utf8(s)
                    .map(Arc::from)
                    .map_err(|_| DecodeError::new("an event's name that is not UTF-8"))
            };
            let (app, kind) = (name()?, name()?);
            event_of = Some(Arc::new(EventOf { app, kind }));
            (first, rest) = after.split_first_chunk::<8>().ok_or_else(short)?;
        }
        let mut redrive_id = None;
        if u64::from_le_bytes(*first) == WITH_ID {
            let (id, after) = rest.split_first_chunk::<8>().ok_or_else(short)?;
            redrive_id = Some(u64::from_le_bytes(*id));
            (first, rest) = after.split_first_chunk::<8>().ok_or_else(short)?;
        }
        let mut text = || -> Result<Option<String>, DecodeError> {
            let (len, after) = rest.split_first_chunk::<4>().ok_or_else(short)?;
            let len = u32::from_le_bytes(*len);
            if len == u32::MAX {
                rest = after;
                return Ok(None);
            }
            let (s, after) = after.split_at_checked(len as usize).ok_or_else(short)?;
            rest = after;
            String::from_utf8(s.to_vec())
                .map(Some)
                .map_err(|_| DecodeError::new("a header that is not UTF-8"))
        };
        let content_type = text()?;
        let tenant = text()?;
        let trail = Trail::default();
        if let Some(id) = redrive_id {
            trail.name(id);
        }
        Ok(Job(Box::new(Fields {
            body: Bytes::copy_from_slice(rest),
            content_type,
            tenant,
            received_unix_ms: u64::from_le_bytes(*first),
            destination: None,
            redrive_id,
            trail: Arc::new(trail),
            trace,
            event: None,
            event_of,
            _ticket: None,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::budget::ByteBudget;

    #[test]
    fn records_read_back_with_and_without_an_earlier_id_and_a_trace() {
        let budget = ByteBudget::new(1 << 20);
        let plain = Job::new(
            Bytes::from_static(b"{}"),
            Some("application/json".into()),
            None,
            Arc::from("a"),
            budget.try_take(2).unwrap(),
        );
        let redriven = Job::redriven(
            Bytes::from_static(b"x"),
            None,
            Some("acme".into()),
            7,
            Some(42),
            budget.try_take(1).unwrap(),
        );
        let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let mut traced = Job::redriven(
            Bytes::from_static(b"{\"t\":1}"),
            None,
            None,
            9,
            Some(43),
            budget.try_take(7).unwrap(),
        );
        traced.trace = trace;
        let mut copy = Job::redriven(
            Bytes::from_static(b"{}"),
            None,
            None,
            5,
            Some(44),
            budget.try_take(2).unwrap(),
        );
        copy.trace = trace;
        copy.event_of = Some(Arc::new(EventOf {
            app: Arc::from("shop"),
            kind: Arc::from("invoice.paid"),
        }));
        // A redriven line's receive time is the line's: never a marker.
        let late = Job::redriven(
            Bytes::from_static(b"late"),
            None,
            None,
            WITH_TRACE,
            None,
            budget.try_take(4).unwrap(),
        );
        let mut out = Vec::new();
        late.encode(&mut out);
        let back = Job::decode(&out).unwrap();
        assert_eq!(
            (back.received_unix_ms, back.trace, &back.body[..]),
            (LATEST, None, &b"late"[..])
        );
        // A reader that knows no trace marker takes it for the receive
        // time, then finds a content type longer than any record.
        let mut traced_bytes = Vec::new();
        traced.encode(&mut traced_bytes);
        assert_eq!(traced_bytes[8..12], OLD_READERS);
        for job in [plain, redriven, traced, copy] {
            let mut out = Vec::new();
            job.encode(&mut out);
            let back = Job::decode(&out).unwrap();
            assert_eq!(back.trace, job.trace);
            assert_eq!(back.body, job.body);
            assert_eq!(back.content_type, job.content_type);
            assert_eq!(back.tenant, job.tenant);
            assert_eq!(back.received_unix_ms, job.received_unix_ms);
            assert_eq!(back.redrive_id, job.redrive_id);
            assert_eq!(back.event_of, job.event_of);
            assert_eq!(back.trail.id(), job.redrive_id.unwrap_or(0));
            assert!(Job::decode(&out[..5]).is_err(), "a record cut short");
        }
    }
}
