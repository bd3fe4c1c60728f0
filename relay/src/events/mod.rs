//! Events: a sender posts an event with a type for one of its
//! applications, and each of the application's endpoints subscribed to
//! the type gets its own copy, paced by its own bucket; every attempt is
//! kept, and a copy can be sent again (resend, recover).
//!
//! - [`store`]: the events store (the event and its copies durable in one
//!   transaction before the 202; each attempt and each copy's end);
//! - [`read`]: the store's queries;
//! - [`record`]: what it keeps.
//!
//! A copy travels as a job (`domain::event_copy`) and reports to the store.
//!
//! The engines post, fan out and send again (`queue::local::events`).

pub(crate) mod id;
pub(crate) mod read;
pub(crate) mod record;
pub(crate) mod retention;
pub(crate) mod store;

pub(crate) use store::EventStore;
