//! [`BucketError`]: why a per-key bucket held in a shared store (Redis,
//! PostgreSQL) did not admit.

use std::fmt;

#[cfg(feature = "postgres")]
use super::PgError;
#[cfg(feature = "redis")]
use super::RedisError;
use crate::keyed::AdmitError;

/// Why a shared per-key bucket call (`RedisBuckets`, `PgBuckets`) did not
/// admit: the bucket said no (or the cost was invalid), or the store failed.
///
/// ```
/// use dripfeed::global::BucketError;
/// use dripfeed::keyed::AdmitError;
/// let err = BucketError::from(AdmitError::CostExceedsSize { cost: 2.0, size: 1.0 });
/// assert!(err.as_admit().is_some());
/// assert!(!err.is_store_failure());
/// assert_eq!(err.to_string(), "cost 2 exceeds bucket size 1");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BucketError {
    /// The bucket's answer: over quota (with the wait), cost above the
    /// size, or an invalid cost.
    Admit(AdmitError),
    /// Redis failed; nothing is known about the bucket.
    #[cfg(feature = "redis")]
    Redis(RedisError),
    /// PostgreSQL failed (and the failure mode is fail-closed); nothing is
    /// known about the bucket.
    #[cfg(feature = "postgres")]
    Postgres(PgError),
}

impl BucketError {
    /// The bucket's refusal, if that is what this is.
    ///
    /// ```
    /// use dripfeed::global::BucketError;
    /// use dripfeed::keyed::AdmitError;
    /// let e = BucketError::from(AdmitError::CostExceedsSize { cost: 2.0, size: 1.0 });
    /// assert!(matches!(e.as_admit(), Some(AdmitError::CostExceedsSize { .. })));
    /// ```
    pub fn as_admit(&self) -> Option<&AdmitError> {
        match self {
            Self::Admit(a) => Some(a),
            #[cfg(any(feature = "redis", feature = "postgres"))]
            _ => None,
        }
    }

    /// Whether the store failed (as opposed to the bucket refusing).
    ///
    /// ```
    /// use dripfeed::global::BucketError;
    /// use dripfeed::keyed::AdmitError;
    /// let e = BucketError::from(AdmitError::CostExceedsSize { cost: 3.0, size: 1.0 });
    /// assert!(!e.is_store_failure());
    /// ```
    pub fn is_store_failure(&self) -> bool {
        self.as_admit().is_none()
    }
}

impl fmt::Display for BucketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admit(a) => a.fmt(f),
            #[cfg(feature = "redis")]
            Self::Redis(r) => r.fmt(f),
            #[cfg(feature = "postgres")]
            Self::Postgres(p) => p.fmt(f),
        }
    }
}

impl std::error::Error for BucketError {}

impl From<AdmitError> for BucketError {
    fn from(a: AdmitError) -> Self {
        Self::Admit(a)
    }
}

#[cfg(feature = "redis")]
impl From<RedisError> for BucketError {
    fn from(r: RedisError) -> Self {
        Self::Redis(r)
    }
}

#[cfg(feature = "postgres")]
impl From<PgError> for BucketError {
    fn from(p: PgError) -> Self {
        Self::Postgres(p)
    }
}
