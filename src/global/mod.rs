//! Fleet scope: limits shared beyond one process.
//!
//! A throttle's drain paces its own emissions; with a [`PermitSource`](crate::PermitSource) it
//! also takes one permit per emission from a source shared by the fleet
//! (e.g. a bucket in Redis), so N processes together emit at the shared
//! rate, not N times it. The source hands out permits from a local pool it
//! refills in the background, so the drain never waits on a round trip
//! while the pool has permits; when it is empty the drain waits on
//! [`PermitSource::ready`](crate::PermitSource::ready).
//!
//! Behind the `redis` feature: [`RedisRate`] (one emission rate for the
//! fleet), [`RedisAimd`] (one adaptive rate for the fleet, decided from
//! every node's measurements), [`RedisBuckets`] (per-key reverse buckets
//! shared by the fleet, a [`BucketStore`](crate::keyed::BucketStore)) and
//! [`RedisStreamSink`] (a dead-letter stream with redrive), all over one
//! [`RedisConnection`] to a server, a primary Sentinel watches (followed
//! through a failover), or a cluster. (A queue shared by a
//! fleet, its idempotency keys and its shared settings are the relay's:
//! `dripfeed-relay`'s fleet engine, built on these.)
//!
//! Behind the `postgres` feature: [`PgBuckets`], the same per-key buckets
//! (the same [`BucketStore`](crate::keyed::BucketStore)) held in one
//! PostgreSQL table, for teams that share state only through
//! PostgreSQL.

#[cfg(feature = "redis")]
mod conn;
mod failure;
#[cfg(any(feature = "redis", feature = "postgres"))]
mod fallback;
#[cfg(feature = "redis")]
mod leaser;
#[cfg(feature = "postgres")]
mod pg_buckets;
#[cfg(feature = "postgres")]
mod pg_error;
#[cfg(feature = "postgres")]
mod pg_sql;
#[cfg(feature = "redis")]
mod redis_aimd;
#[cfg(feature = "redis")]
mod redis_buckets;
#[cfg(feature = "redis")]
mod redis_rate;
#[cfg(feature = "redis")]
mod redis_sink;
#[cfg(feature = "redis")]
mod sentinel;
#[cfg(any(feature = "redis", feature = "postgres"))]
mod store_health;

/// The per-key stores' error, also here for the fleet-scope stores.
pub use crate::keyed::BucketError;
#[cfg(feature = "redis")]
pub use conn::{RedisConnection, RedisError};
pub use failure::Failure;
#[cfg(feature = "postgres")]
pub use pg_buckets::PgBuckets;
#[cfg(feature = "postgres")]
pub use pg_error::PgError;
#[cfg(feature = "redis")]
pub use redis_aimd::{RedisAimd, Steering};
#[cfg(feature = "redis")]
pub use redis_buckets::RedisBuckets;
#[cfg(feature = "redis")]
pub use redis_rate::{RedisRate, RedisRateBuilder, RedisRateError};
#[cfg(feature = "redis")]
pub use redis_sink::{RedisStreamSink, Redrive};
