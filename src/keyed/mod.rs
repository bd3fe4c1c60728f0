//! Per-key reverse leaky buckets in a bounded table.
//!
//! Each key (tenant, IP, endpoint) has a bucket holding *debt*: admitting a
//! job of cost `c` adds `c`, debt drains at the key's rate, and a job is
//! admitted iff `debt_now + c <= size`. A bucket at zero debt is the same as
//! no bucket, so [`KeyedBuckets`] keeps at most `max_keys` of them and, when
//! full, forgets one already at zero debt or else the one that empties
//! soonest. Debt is brought up to date lazily on access; no task sweeps.
//!
//! - the pure maths of one bucket ([`Quota`], [`Bucket`], the admission
//!   outcome types); every function takes `now`;
//! - the sharded, bounded table ([`KeyedBuckets`]);
//! - [`AllOf`], several limits on one key (100/s *and* 10,000/h), each a
//!   store of its own, the tightest deciding;
//! - [`BucketStore`], the operations every store of buckets has (this
//!   table, `global::RedisBuckets`, `global::PgBuckets`), so a throttle
//!   takes any of them.
//!
//! ```
//! use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota};
//! use std::time::Duration;
//!
//! // 10 units of burst per tenant, refilling 2 units a second.
//! let table = KeyedBuckets::new(100_000, Quota::per_second(2.0).burst(10.0)?)?;
//! let now = tokio::time::Instant::now();
//! assert!(table.try_admit_at(&"acme", 8.0, now).is_ok());
//! match table.try_admit_at(&"acme", 4.0, now) {
//!     Err(AdmitError::OverQuota(over)) => assert_eq!(over.retry_after(), Duration::from_secs(1)),
//!     other => panic!("{other:?}"),
//! }
//! assert!(table.try_admit_at(&"acme", 4.0, now + Duration::from_secs(1)).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod all_of;
pub(crate) mod bucket;
mod clock;
mod prehashed;
mod shard;
mod share;
mod store;
mod store_error;
mod table;

pub use all_of::AllOf;
pub use bucket::{
    Admit, AdmitError, Bucket, InvalidCost, OverQuota, Quota, QuotaBuilder, QuotaError,
};
pub use prehashed::{Prehashed, PrehashedHasher};
pub use share::fair_share;
pub use store::BucketStore;
pub use store_error::{BucketError, StoreFailure};
pub use table::{KeyedBuckets, KeyedBucketsBuilder, TableError, TooManyOverrides};

/// `KeyedBuckets` is shared across threads: it must stay `Send + Sync`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<KeyedBuckets<String>>();
};
