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

mod admission;
mod builder;
mod catch;
mod clock;
pub mod destinations;
mod downstream;
mod drain;
mod endings;
mod error;
mod feedback;
pub mod global;
pub mod headers;
mod ids;
mod inflight;
#[cfg(feature = "journal")]
pub mod journal;
mod journaled;
pub mod keyed;
mod ledger;
pub mod metrics;
mod num;
mod outcome;
mod overflow;
mod per_key;
mod permits;
pub mod rate;
mod rate_limit;
mod refusals;
mod reservations;
mod retries;
mod retry;
mod settings;
mod shared;
mod slots;
mod throttle;
#[cfg(feature = "tower")]
pub mod tower;

pub use builder::ThrottleBuilder;
pub use downstream::{Attempt, Delivery, Downstream};
pub use drain::dispatch::Dispatch;
pub use drain::hook::{DrainHook, Emit};
pub use drain::{Drain, DrainFuture, ShutdownReport};
pub use error::{BuildError, Cause, RateError, Reason, Rejected};
pub use feedback::AttemptEnd;
pub use inflight::InFlightBudget;
pub use outcome::{Outcome, Stats};
pub use overflow::{ChannelSink, DeadLetter, DeadLetterReason, DeadLetterSink, Overflow};
pub use permits::{Permit, PermitSource};
pub use retry::RetryPolicy;
pub use settings::Settings;
pub use slots::{Slot, Slots, Waiter};
pub use throttle::{Admitted, Throttle};
