//! # dripfeed
//!
//! A bounded-queue async job throttler built on a *true* leaky bucket.
//!
//! Jobs are admitted into a bounded lock-free ring sized as
//! `latency budget × drain rate`; one drain task emits them to your
//! [`Downstream`] at a constant rate; when the ring is full an explicit
//! [`Overflow`] policy decides who loses, and a refused caller gets the job
//! back with an honest `Retry-After` computed from live state.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use dripfeed::{Delivery, Reason, Throttle};
//! use std::time::Duration;
//!
//! // A fragile receiver takes 200 webhooks/s; we accept 2 s of queueing.
//! let (throttle, _drain) = Throttle::builder()
//!     .drain_rate(200.0)
//!     .latency_budget(Duration::from_secs(2))
//!     .build(|body: &Vec<u8>, _attempt| {
//!         let _len = body.len();
//!         async move { Delivery::Done } // POST the body here
//!     })
//!     .unwrap();
//!
//! // A burst of 1,000: 400 fit (2 s × 200/s), the rest are refused at once.
//! let mut refused = 0;
//! for _ in 0..1000 {
//!     if let Err(rejected) = throttle.try_submit(vec![0u8; 16]) {
//!         assert_eq!(rejected.reason(), Reason::Overloaded); // HTTP 503
//!         assert!(rejected.retry_after().unwrap() >= Duration::from_secs(1));
//!         refused += 1;
//!     }
//! }
//! assert_eq!(refused, 600);
//!
//! // The queue leaks at 200/s: two seconds later it is empty.
//! tokio::time::sleep(Duration::from_secs(2)).await;
//! assert_eq!(throttle.stats().delivered(), 400);
//! # }
//! ```
//!
//! The pieces: [`ThrottleBuilder`] validates the configuration;
//! [`Throttle`] admits ([`try_submit`](Throttle::try_submit),
//! [`submit`](Throttle::submit)), reconfigures and shuts down;
//! [`Rejected`] hands a refused job back with its [`Reason`] and wait;
//! [`headers`] renders `Retry-After` and `RateLimit` fields; [`metrics`]
//! names every metric; [`Stats`] and [`Outcome`] account for every job.
//!
//! Delivery is at least once: a job is counted delivered when the downstream
//! says [`Delivery::Done`]; one that failed may have reached the receiver.

#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

// The flow, in the order a job meets it: the handle and its builder
// (`handle`), admission to a place in the ring (`admission`), the drain that
// emits at the drain rate (`drain`), and the accounting of every job's end
// (`accounting`); beside them the limits on how many may go (`limits`,
// `keyed`, `rate`, `global`), the durable journal, the response headers,
// the outbound-client wrappers (`client`) and, built on the public surface
// only, the destinations set.
mod accounting;
mod admission;
mod client;
pub mod destinations;
mod drain;
mod error;
pub mod global;
mod handle;
pub mod headers;
#[cfg(feature = "journal")]
pub mod journal;
pub mod keyed;
mod limits;
pub mod rate;
mod util;

/// The README's examples, compiled and run as the crate's doctests: each is
/// a whole program that must work as pasted.
#[cfg(all(doctest, feature = "tower"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// The book's library guide and quick start, compiled and run the same way.
#[cfg(all(doctest, feature = "tower"))]
#[doc = include_str!("../docs/src/library/guide.md")]
struct GuideExamples;

/// The book's quick start.
#[cfg(all(doctest, feature = "tower"))]
#[doc = include_str!("../docs/src/quick-start.md")]
struct QuickStartExamples;

pub use accounting::dead_letter::{
    ChannelSink, DeadLetter, DeadLetterReason, DeadLetterSink, FlushError,
};
pub use accounting::metrics;
pub use accounting::outcome::{Outcome, Stats};
pub use admission::overflow::Overflow;
pub use admission::reason::{Cause, Reason};
pub use admission::rejected::Rejected;
pub use client::slots::{Slot, Slots, Waiter};
#[cfg(feature = "tower")]
pub use client::tower;
pub use drain::dispatch::Dispatch;
pub use drain::downstream::{Attempt, Delivery, Downstream};
pub use drain::fair::DeliveryOrder;
pub use drain::feedback::AttemptEnd;
pub use drain::hook::{DrainHook, Emit};
pub use drain::retry_policy::RetryPolicy;
pub use drain::{Drain, DrainFuture, ShutdownReport};
pub use error::{BuildError, RateError};
pub use handle::builder::ThrottleBuilder;
pub use handle::settings::Settings;
pub use handle::submission::{Key, Submission};
pub use handle::throttle::{Admitted, Throttle};
pub use limits::in_flight::InFlightBudget;
pub use limits::permits::{Permit, PermitSource};
