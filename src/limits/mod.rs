//! How many may go at once: the in-flight budget (a throttle's own, or one
//! shared by several: [`InFlightBudget`](crate::InFlightBudget)) and fleet
//! permits from a source shared beyond the process ([`PermitSource`](crate::PermitSource)).

pub(crate) mod in_flight;
pub(crate) mod permits;
