//! A webhook's status as the registry keeps it: a 40-byte record whose
//! names (tenant, destination) are small indexes into tables every record
//! shares. The registry follows every held webhook and up to `status_max`
//! (a million by default) ended ones: each byte of a record is a megabyte
//! there, and a queued webhook should cost about its body.

use std::collections::HashMap;
use std::sync::Arc;

use super::{State, Status};

/// One webhook's status, compact. Zero means "none" in every field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rec {
    /// When the next attempt is due, ms since the Unix epoch.
    pub next_attempt_ms: u64,
    /// When the relay received it, ms since the Unix epoch.
    pub received_ms: u64,
    /// Its public id when the set's differs (a redriven webhook).
    pub public: u64,
    /// Its destination: index + 1 into [`Names`].
    pub destination: u32,
    /// Attempts made so far.
    pub attempts: u32,
    /// Its tenant: index + 1 into [`Names`] (configured tenants only).
    pub tenant: u16,
    /// The receiver's last HTTP status.
    pub last_status: u16,
    /// Its last error: index + 1 into [`Names`].
    pub error: u16,
    /// Where it is.
    pub state: State,
}

/// The names records point at: the configured tenants (fixed at start),
/// every destination met (as many as the set has known) and the errors
/// met (the first [`MOST_ERRORS`]; past them, an error is kept as its kind
/// alone).
#[derive(Default)]
pub(crate) struct Names {
    tenants: Vec<Arc<str>>,
    tenant_index: HashMap<Arc<str>, u16>,
    destinations: Vec<Arc<str>>,
    destination_index: HashMap<Arc<str>, u32>,
    errors: Vec<Arc<str>>,
    error_index: HashMap<Arc<str>, u16>,
}

/// Distinct error texts kept word for word.
pub(crate) const MOST_ERRORS: usize = 4096;

/// `Some(v)` unless `v` is zero.
fn some<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

impl Names {
    /// The tables for the configured `tenants` (beyond 65,534 of them the
    /// rest own no statuses: only the admin token sees theirs).
    pub(crate) fn new<'a>(tenants: impl IntoIterator<Item = &'a str>) -> Names {
        let mut names = Names::default();
        for (i, t) in tenants
            .into_iter()
            .take(usize::from(u16::MAX - 1))
            .enumerate()
        {
            let name: Arc<str> = Arc::from(t);
            names.tenants.push(name.clone());
            names.tenant_index.insert(name, (i + 1) as u16);
        }
        names
    }

    /// Names `tenants` that it did not know yet (a reload added them);
    /// indexes given stay as they were.
    pub(crate) fn add_tenants<'a>(&mut self, tenants: impl IntoIterator<Item = &'a str>) {
        for t in tenants {
            if self.tenant_index.contains_key(t) || self.tenants.len() >= usize::from(u16::MAX - 1)
            {
                continue;
            }
            let name: Arc<str> = Arc::from(t);
            self.tenants.push(name.clone());
            self.tenant_index.insert(name, self.tenants.len() as u16);
        }
    }

    /// The index of a configured tenant (0: none, or not configured).
    pub(crate) fn tenant(&self, name: Option<&str>) -> u16 {
        name.and_then(|n| self.tenant_index.get(n))
            .copied()
            .unwrap_or(0)
    }

    /// The index of `destination`, given one if new.
    pub(crate) fn destination(&mut self, destination: &str) -> u32 {
        if let Some(&i) = self.destination_index.get(destination) {
            return i;
        }
        let name: Arc<str> = Arc::from(destination);
        self.destinations.push(name.clone());
        let i = u32::try_from(self.destinations.len()).unwrap_or(u32::MAX);
        self.destination_index.insert(name, i);
        i
    }

    /// The index of the error `text` (of kind `kind`), given one if new
    /// (past [`MOST_ERRORS`], the index of `kind` alone).
    pub(crate) fn error(&mut self, kind: &str, text: &str) -> u16 {
        let text = match self.errors.len() < MOST_ERRORS {
            true => text,
            false => kind,
        };
        if let Some(&i) = self.error_index.get(text) {
            return i;
        }
        let name: Arc<str> = Arc::from(text);
        self.errors.push(name.clone());
        let i = u16::try_from(self.errors.len()).unwrap_or(u16::MAX);
        self.error_index.insert(name, i);
        i
    }

    fn error_text(&self, i: u16) -> Option<Arc<str>> {
        let at = usize::from(i).checked_sub(1)?;
        self.errors.get(at).cloned()
    }

    fn tenant_name(&self, i: u16) -> Option<Arc<str>> {
        let at = usize::from(i).checked_sub(1)?;
        self.tenants.get(at).cloned()
    }

    fn destination_name(&self, i: u32) -> Option<Arc<str>> {
        let at = usize::try_from(i).ok()?.checked_sub(1)?;
        self.destinations.get(at).cloned()
    }

    /// The record as the routes show it.
    pub(crate) fn status(&self, r: &Rec) -> Status {
        Status {
            state: r.state,
            tenant: self.tenant_name(r.tenant),
            destination: self.destination_name(r.destination),
            attempts: r.attempts,
            last_status: some(r.last_status),
            last_error: self.error_text(r.error),
            next_attempt_unix_ms: some(r.next_attempt_ms),
            received_unix_ms: some(r.received_ms),
        }
    }

    /// A status read back from the file, as a record.
    pub(crate) fn record(&mut self, s: &Status) -> Rec {
        Rec {
            state: s.state,
            tenant: self.tenant(s.tenant.as_deref()),
            destination: s.destination.as_deref().map_or(0, |d| self.destination(d)),
            attempts: s.attempts,
            last_status: s.last_status.unwrap_or(0),
            error: s
                .last_error
                .as_deref()
                .map_or(0, |e| self.error(e.split(':').next().unwrap_or(e), e)),
            next_attempt_ms: s.next_attempt_unix_ms.unwrap_or(0),
            received_ms: s.received_unix_ms.unwrap_or(0),
            public: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_small_and_reads_back_as_it_was() {
        assert_eq!(std::mem::size_of::<Rec>(), 40);
        let mut names = Names::new(["acme", "globex"]);
        let status = Status {
            state: State::RetryWaiting,
            tenant: Some(Arc::from("globex")),
            destination: Some(Arc::from("billing")),
            attempts: 2,
            last_status: Some(503),
            last_error: Some(Arc::from("status: status 503")),
            next_attempt_unix_ms: Some(9),
            received_unix_ms: Some(7),
        };
        let rec = names.record(&status);
        assert_eq!((rec.tenant, rec.destination), (2, 1));
        let back = names.status(&rec);
        assert_eq!(back.tenant.as_deref(), Some("globex"));
        assert_eq!(back.destination.as_deref(), Some("billing"));
        assert_eq!(
            (
                back.attempts,
                back.last_status,
                back.next_attempt_unix_ms,
                back.received_unix_ms
            ),
            (2, Some(503), Some(9), Some(7))
        );
        assert_eq!(back.last_error.as_deref(), Some("status: status 503"));
        assert_eq!(names.tenant(Some("initech")), 0, "not configured: no owner");
        assert_eq!(names.destination("billing"), 1, "interned once");
    }
}
