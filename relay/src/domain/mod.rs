//! The floor the relay's parts stand on: the types they share and nothing
//! that runs. The webhook job and how it is encoded, its place in a trace
//! (`trace_context`), the byte budget every byte a client makes the relay
//! hold counts against, the RFC 9457 problem every refusal is, the names a
//! request gives (its tenant, its `Idempotency-Key`), the API's shared
//! schemas, and the one check of a destination's limits (`limits`) every
//! door a destination comes in by goes through; and an event's copy as a
//! job carries it (`event_copy`: it reports to the events store). It
//! imports only the configuration (plain data), the events store and the
//! library.

pub(crate) mod budget;
pub(crate) mod event_copy;
pub(crate) mod job;
pub(crate) mod limits;
pub(crate) mod names;
pub(crate) mod problem;
pub(crate) mod schemas;
pub(crate) mod trace_context;
