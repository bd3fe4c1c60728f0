//! [`PgError`]: a PostgreSQL failure seen by [`PgBuckets`](super::PgBuckets).

use std::fmt;

/// A PostgreSQL failure: no connection from the pool, a statement that
/// failed or took too long, or an answer without the expected shape.
///
/// ```
/// use dripfeed::global::PgError;
/// let err = PgError::unexpected("no row");
/// assert_eq!(err.to_string(), "unexpected postgres answer: no row");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgError {
    message: String,
}

impl PgError {
    /// An answer PostgreSQL gave that dripfeed did not expect.
    ///
    /// ```
    /// # use dripfeed::global::PgError;
    /// assert!(PgError::unexpected("x").to_string().contains('x'));
    /// ```
    pub fn unexpected(what: &str) -> Self {
        Self {
            message: format!("unexpected postgres answer: {what}"),
        }
    }

    pub(crate) fn new(message: String) -> Self {
        Self { message }
    }

    pub(crate) fn timeout() -> Self {
        Self::new("postgres call timed out".to_owned())
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::new(format!("postgres: {e}"))
    }
}

impl From<deadpool_postgres::PoolError> for PgError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Self::new(format!("postgres pool: {e}"))
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PgError {}
