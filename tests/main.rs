//! The library's integration tests, one file per behaviour, built as one
//! test binary (one link instead of one per file: a clean `cargo test`
//! builds several times faster). Each module runs on paused tokio time
//! unless its docs say why not; those that need Redis or PostgreSQL start
//! their own servers (`support`). `tests/idle_cost.rs` is a binary of its
//! own: dhat's allocator is the whole process's.
//!
//! `cargo test --all-features --test behaviours MODULE` runs one file's tests.

mod support;

mod accounting;
mod adaptive;
mod aimd;
mod api_client;
mod attempts_made;
#[cfg(all(feature = "redis", feature = "postgres"))]
mod bucket_stores;
mod config;
mod defects;
mod destinations;
mod dispatch;
mod drain_cost;
mod fair_delivery;
mod faults;
mod flood;
mod hostile_inputs;
#[cfg(feature = "journal")]
mod journal;
mod keyed_eviction;
mod keyed_model;
mod keyed_store;
mod latency_window;
mod overflow;
mod pacing;
mod per_key;
mod permits;
#[cfg(feature = "postgres")]
mod pg_buckets;
mod races;
#[cfg(feature = "redis")]
mod redis_aimd;
#[cfg(feature = "redis")]
mod redis_buckets;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redis_fleet;
#[cfg(feature = "redis")]
mod redis_sentinel;
#[cfg(feature = "redis")]
mod redis_sink;
mod retry_after;
mod retry_metrics;
mod several_limits;
mod shutdown;
mod slots;
mod soak;
mod stranding;
mod tenant_share;
#[cfg(feature = "tower")]
mod tower;
