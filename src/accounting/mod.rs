//! Accounting: every admitted job ends in exactly one counted place.
//! [`outcome`] names the ends and snapshots the counts ([`Stats`](crate::Stats));
//! [`ledger`] records each event into the counters and the metrics at once;
//! [`refusals`] counts refusals per producer thread; [`endings`] hands a job
//! that is given up on to the dead-letter sink or a hook; [`dead_letter`]
//! holds the sinks; [`metrics`] names every metric.

pub(crate) mod dead_letter;
pub(crate) mod endings;
pub(crate) mod ledger;
pub mod metrics;
pub(crate) mod outcome;
pub(crate) mod refusals;
