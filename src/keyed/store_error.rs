//! [`BucketError`]: why a [`BucketStore`](super::BucketStore) call did not
//! succeed — the bucket's own answer, or the store failing.

use std::fmt;

use super::{AdmitError, TooManyOverrides};

/// Why a [`BucketStore`](super::BucketStore) call did not succeed: the
/// bucket said no (over quota with the exact wait, a cost above the size, an
/// invalid cost), the store keeps no more overrides, or the store failed.
///
/// Only the first is the key's fault (a 429); a store failure says nothing
/// about the key, and a throttle answers it with 503
/// ([`Reason::Unavailable`](crate::Reason::Unavailable)), never 429.
///
/// ```
/// use dripfeed::keyed::{AdmitError, BucketError, StoreFailure};
/// let err = BucketError::from(AdmitError::CostExceedsSize { cost: 2.0, size: 1.0 });
/// assert!(err.as_admit().is_some());
/// assert!(!err.is_store_failure());
/// assert_eq!(err.to_string(), "cost 2 exceeds bucket size 1");
///
/// let down = BucketError::Unavailable(StoreFailure::new("redis", "connection refused"));
/// assert!(down.is_store_failure());
/// assert_eq!(down.to_string(), "redis unavailable: connection refused");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BucketError {
    /// The bucket's answer: over quota (with the wait), cost above the
    /// size, or an invalid cost.
    Admit(AdmitError),
    /// A quota override was refused: the store keeps no more of them.
    TooManyOverrides(TooManyOverrides),
    /// The store failed (and its failure mode is fail-closed): nothing is
    /// known about the bucket.
    Unavailable(StoreFailure),
}

impl BucketError {
    /// The bucket's refusal, if that is what this is.
    ///
    /// ```
    /// use dripfeed::keyed::{AdmitError, BucketError};
    /// let e = BucketError::from(AdmitError::CostExceedsSize { cost: 2.0, size: 1.0 });
    /// assert!(matches!(e.as_admit(), Some(AdmitError::CostExceedsSize { .. })));
    /// ```
    pub fn as_admit(&self) -> Option<&AdmitError> {
        match self {
            Self::Admit(a) => Some(a),
            _ => None,
        }
    }

    /// Whether the store failed (as opposed to the bucket refusing).
    ///
    /// ```
    /// use dripfeed::keyed::{AdmitError, BucketError, StoreFailure};
    /// let e = BucketError::from(AdmitError::CostExceedsSize { cost: 3.0, size: 1.0 });
    /// assert!(!e.is_store_failure());
    /// assert!(BucketError::from(StoreFailure::new("postgres", "timeout")).is_store_failure());
    /// ```
    pub fn is_store_failure(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl fmt::Display for BucketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admit(a) => a.fmt(f),
            Self::TooManyOverrides(t) => t.fmt(f),
            Self::Unavailable(s) => s.fmt(f),
        }
    }
}

impl std::error::Error for BucketError {}

impl From<AdmitError> for BucketError {
    fn from(a: AdmitError) -> Self {
        Self::Admit(a)
    }
}

impl From<TooManyOverrides> for BucketError {
    fn from(t: TooManyOverrides) -> Self {
        Self::TooManyOverrides(t)
    }
}

impl From<StoreFailure> for BucketError {
    fn from(s: StoreFailure) -> Self {
        Self::Unavailable(s)
    }
}

/// A shared store that did not answer (or answered nonsense): which store
/// and what went wrong.
///
/// ```
/// use dripfeed::keyed::StoreFailure;
/// let f = StoreFailure::new("postgres", "timed out after 500ms");
/// assert_eq!((f.store(), f.detail()), ("postgres", "timed out after 500ms"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFailure {
    store: &'static str,
    detail: String,
}

impl StoreFailure {
    /// The failure of `store` (e.g. `"redis"`), described by `detail`.
    ///
    /// ```
    /// use dripfeed::keyed::StoreFailure;
    /// assert_eq!(StoreFailure::new("mine", "down").to_string(), "mine unavailable: down");
    /// ```
    pub fn new(store: &'static str, detail: impl Into<String>) -> Self {
        Self {
            store,
            detail: detail.into(),
        }
    }

    /// Which store failed.
    ///
    /// ```
    /// # use dripfeed::keyed::StoreFailure;
    /// assert_eq!(StoreFailure::new("redis", "x").store(), "redis");
    /// ```
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// What went wrong.
    ///
    /// ```
    /// # use dripfeed::keyed::StoreFailure;
    /// assert_eq!(StoreFailure::new("redis", "refused").detail(), "refused");
    /// ```
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} unavailable: {}", self.store, self.detail)
    }
}

impl std::error::Error for StoreFailure {}
