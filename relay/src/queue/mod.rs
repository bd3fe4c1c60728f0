//! The queue: one contract ([`contract::Queue`]) and its two engines.
//!
//! - [`local`]: one relay's queue, the library's destinations set with its
//!   journal, the dead-letter file beside it, idempotency keys and webhook
//!   statuses kept in the relay (and beside the journal);
//! - `fleet` (feature `redis`): the fleet's queue in Redis Streams, one
//!   stream per destination, keys, statuses, counts and dead letters in
//!   Redis, every relay delivering from it.
//!
//! Intake, the admin API and serve hold one `Arc<dyn Queue>` and never ask
//! which engine is behind it; [`backends`] is the one place that opens
//! what needs Redis or PostgreSQL. Beside them: the tenant quota stores
//! ([`quotas`]) and the checks `/readyz` makes of shared stores
//! ([`stores`]).

pub(crate) mod backends;
pub(crate) mod contract;
pub(crate) mod event_charge;
pub(crate) mod events;
#[cfg(feature = "redis")]
pub(crate) mod fleet;
pub(crate) mod local;
pub(crate) mod quotas;
pub(crate) mod refusal;
pub(crate) mod stores;

pub(crate) use contract::*;

/// The metrics' `throttle` label.
pub(crate) const NAME: &str = "webhook_relay";
