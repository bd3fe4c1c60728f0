//! [`Failure`]: what a fleet-scope type does while its shared store is
//! unreachable, shared by the Redis and PostgreSQL backends.

/// What happens while the fleet's shared store (Redis, PostgreSQL) cannot
/// be reached.
///
/// ```
/// use dripfeed::global::Failure;
/// let open = Failure::FailOpen { local_share: 1.0 / 3.0 };
/// assert_ne!(open, Failure::FailClosed);
/// assert_eq!(Failure::default(), Failure::FailClosed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Failure {
    /// Keep going on a local share of the shared limit until the store
    /// answers again: `RedisRate` emits at `global rate ×
    /// local_share` (e.g. `1 / expected fleet size`) from a local pool;
    /// `PgBuckets` admits through in-memory buckets
    /// draining at `rate × local_share`.
    FailOpen {
        /// This node's share of the global rate, in `(0, 1]`.
        local_share: f64,
    },
    /// Refuse until the store answers again: `RedisRate`
    /// hands out no permits (emission pauses; admission goes on),
    /// `PgBuckets` returns the store's error.
    #[default]
    FailClosed,
}
