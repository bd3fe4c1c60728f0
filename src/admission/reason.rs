//! Why a job was refused: [`Reason`], and for [`Reason::Unavailable`] its
//! [`Cause`]. Metric labels and HTTP statuses follow them by name.

use std::fmt;

/// Why a job was refused at submit.
///
/// ```
/// use dripfeed::{Cause, Reason};
/// assert_eq!(Reason::Overloaded.status(), 503);
/// assert_eq!(Reason::OverQuota.status(), 429);
/// assert_eq!(Reason::Overloaded.as_str(), "overloaded");
/// let down = Reason::Unavailable { cause: Cause::StoreDown };
/// assert_eq!((down.status(), down.as_str()), (503, "store_down"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The shared queue is full: the system's state (HTTP 503).
    Overloaded,
    /// The job's key is over its own quota: the client's fault (HTTP 429).
    OverQuota,
    /// The throttle is shutting down or shut down (HTTP 503).
    Closed,
    /// The job can never be admitted, e.g. a cost above the key's size (HTTP 400).
    Invalid,
    /// Something the throttle depends on cannot serve now (HTTP 503), not
    /// the caller's fault: `cause` says what, and is the metric label.
    Unavailable {
        /// What is unavailable.
        cause: Cause,
    },
}

/// What made a refusal [`Reason::Unavailable`]. New causes are added as
/// capabilities that can fail arrive; counts and metric labels follow them
/// by name, with no fixed table to grow.
///
/// ```
/// use dripfeed::Cause;
/// assert_eq!(Cause::StoreDown.as_str(), "store_down");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// The store that holds per-key budgets (Redis, PostgreSQL) cannot be
    /// reached and is configured to fail closed.
    StoreDown,
    /// The journal holds its size bound (new jobs wait until finished ones
    /// are reclaimed).
    JournalFull,
    /// The journal cannot write (a full disk, permissions, a stopped writer).
    JournalFailed,
}

impl Cause {
    /// The `reason` label of a refusal for this cause.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::StoreDown => "store_down",
            Cause::JournalFull => "journal_full",
            Cause::JournalFailed => "journal_failed",
        }
    }
}

impl Reason {
    /// The HTTP status that fits this refusal.
    pub fn status(self) -> u16 {
        match self {
            Reason::Overloaded | Reason::Closed | Reason::Unavailable { .. } => 503,
            Reason::OverQuota => 429,
            Reason::Invalid => 400,
        }
    }

    /// The `reason` label in metrics (`overloaded`, `over_quota`, `closed`,
    /// `invalid`, or an unavailable cause).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Overloaded => "overloaded",
            Reason::OverQuota => "over_quota",
            Reason::Closed => "closed",
            Reason::Invalid => "invalid",
            Reason::Unavailable { cause } => cause.as_str(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
