//! Fleet scope: limits shared beyond one process.
//!
//! A throttle's drain paces its own emissions; with a [`PermitSource`] it
//! also takes one permit per emission from a source shared by the fleet
//! (e.g. a bucket in Redis), so N processes together emit at the shared
//! rate, not N times it. The source hands out permits from a local pool it
//! refills in the background, so the drain never waits on a round trip
//! while the pool has permits; when it is empty the drain waits on
//! [`PermitSource::ready`].
//!
//! Behind the `redis` feature: [`RedisRate`] (one emission rate for the
//! fleet), [`RedisBuckets`] (per-key reverse buckets shared by the fleet) and
//! [`RedisStreamSink`] (a dead-letter stream with redrive), all over one
//! [`RedisConnection`] to a server or a cluster.
//!
//! Behind the `postgres` feature: [`PgBuckets`], the same per-key buckets
//! held in one PostgreSQL table, for teams that share state only through
//! PostgreSQL.

use async_trait::async_trait;

#[cfg(any(feature = "redis", feature = "postgres"))]
mod bucket_error;
#[cfg(feature = "redis")]
mod conn;
#[cfg(any(feature = "redis", feature = "postgres"))]
mod failure;
#[cfg(feature = "redis")]
mod leaser;
#[cfg(feature = "postgres")]
mod pg_buckets;
#[cfg(feature = "postgres")]
mod pg_error;
#[cfg(feature = "postgres")]
mod pg_sql;
#[cfg(feature = "redis")]
mod redis_buckets;
#[cfg(feature = "redis")]
mod redis_rate;
#[cfg(feature = "redis")]
mod redis_sink;
#[cfg(feature = "postgres")]
mod store_health;

#[cfg(any(feature = "redis", feature = "postgres"))]
pub use bucket_error::BucketError;
#[cfg(feature = "redis")]
pub use conn::{RedisConnection, RedisError};
#[cfg(any(feature = "redis", feature = "postgres"))]
pub use failure::Failure;
#[cfg(feature = "postgres")]
pub use pg_buckets::PgBuckets;
#[cfg(feature = "postgres")]
pub use pg_error::PgError;
#[cfg(feature = "redis")]
pub use redis_buckets::RedisBuckets;
#[cfg(feature = "redis")]
pub use redis_rate::{RedisRate, RedisRateBuilder, RedisRateError};
#[cfg(feature = "redis")]
pub use redis_sink::{RedisStreamSink, Redrive};

/// Emission permits shared beyond this process.
///
/// The drain calls [`try_take`](Self::try_take) before each emission (only
/// when a job is waiting), gives the permit back if the job turned out to
/// be gone or expired, and awaits [`ready`](Self::ready) when none was
/// available. It never blocks on the source.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::global::PermitSource;
/// use dripfeed::{Delivery, Throttle};
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
///
/// /// Three permits, ever.
/// struct Three(AtomicU32);
///
/// #[async_trait::async_trait]
/// impl PermitSource for Three {
///     fn try_take(&self) -> bool {
///         self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
///     }
///     fn give_back(&self) {
///         self.0.fetch_add(1, Ordering::AcqRel);
///     }
///     async fn ready(&self) {
///         std::future::pending::<()>().await
///     }
/// }
///
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .permits(Three(AtomicU32::new(3)))
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// for job in 0..5 {
///     throttle.try_submit(job).unwrap();
/// }
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(throttle.stats().delivered(), 3);
/// assert_eq!(throttle.depth(), 2, "the rest wait for permits");
/// # }
/// ```
#[async_trait]
pub trait PermitSource: Send + Sync + 'static {
    /// Takes one permit if one is available here and now. Never blocks.
    fn try_take(&self) -> bool;

    /// Returns a permit taken for a job that was not emitted after all.
    fn give_back(&self) {}

    /// Resolves when [`try_take`](Self::try_take) may succeed again.
    async fn ready(&self);

    /// The drain's current local rate, jobs per second: told at start and on
    /// every change, so a source can size its leases.
    fn set_local_rate(&self, _jobs_per_second: f64) {}
}

/// A source shared behind an `Arc` (e.g. one kept to read its counters) is a
/// source too.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::global::PermitSource;
/// use dripfeed::{Delivery, Throttle};
/// use std::sync::Arc;
///
/// struct Unlimited;
/// #[async_trait::async_trait]
/// impl PermitSource for Unlimited {
///     fn try_take(&self) -> bool {
///         true
///     }
///     async fn ready(&self) {}
/// }
///
/// let source: Arc<dyn PermitSource> = Arc::new(Unlimited);
/// let kept = source.clone();
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .permits(source)
///     .build(|_: &u8, _| async { Delivery::Done })
///     .unwrap();
/// assert!(kept.try_take());
/// # drop(throttle);
/// # }
/// ```
#[async_trait]
impl<T: PermitSource + ?Sized> PermitSource for std::sync::Arc<T> {
    fn try_take(&self) -> bool {
        (**self).try_take()
    }

    fn give_back(&self) {
        (**self).give_back()
    }

    async fn ready(&self) {
        (**self).ready().await
    }

    fn set_local_rate(&self, jobs_per_second: f64) {
        (**self).set_local_rate(jobs_per_second)
    }
}
