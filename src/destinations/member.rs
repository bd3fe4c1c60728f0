//! A destination's hook into its throttle's drain (a [`DrainHook`]): the
//! breaker is asked before each emission and told of each attempt, the
//! set's bound hears of each job's end, and the destination hands its
//! throttle back once the drain has been idle for the set's `idle_after`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::Pass;
use super::gate::Gate;
use super::tally::Tally;
use crate::{Attempt, AttemptEnd, DrainHook, Emit, Outcome};

/// What a destination's throttle takes from its set.
pub(crate) struct Member {
    /// The destination's name (its breaker's log lines say it).
    pub(crate) destination: Arc<str>,
    pub(crate) gate: Arc<Gate>,
    pub(crate) tally: Arc<Tally>,
    /// Called when the drain has been idle for `idle_after`: the
    /// destination hands its throttle back.
    pub(crate) on_idle: Box<dyn Fn() + Send + Sync>,
    pub(crate) idle_after: Duration,
    /// The set's own user hook ([`DestinationsBuilder::drain_hook`](super::DestinationsBuilder::drain_hook)),
    /// told of every event after the destination's own bookkeeping.
    pub(crate) outer: Option<Arc<dyn DrainHook>>,
}

impl DrainHook for Member {
    fn before_emit(&self, now: Instant) -> Emit {
        let own = match self.gate.pass(now) {
            Ok(Pass::Send) => Emit::Send,
            Ok(Pass::Probe) => Emit::Probe,
            // The probe is out: wait for it to land.
            Ok(Pass::Probing | Pass::Until(_)) => Emit::AfterLanding,
            Err(until) => Emit::Until(until),
        };
        match (own, &self.outer) {
            (Emit::Send, Some(outer)) => outer.before_emit(now),
            _ => own,
        }
    }

    fn probe_sent(&self) {
        self.gate.probing();
    }

    fn attempt_ended(&self, attempt: Attempt, end: AttemptEnd) {
        self.gate.record(&self.destination, end);
        if let Some(outer) = &self.outer {
            outer.attempt_ended(attempt, end);
        }
    }

    fn retry_scheduled(&self, next: Attempt, after: Duration) {
        if let Some(outer) = &self.outer {
            outer.retry_scheduled(next, after);
        }
    }

    fn job_ended(&self, id: u64, outcome: Outcome) {
        self.tally.finished();
        if let Some(outer) = &self.outer {
            outer.job_ended(id, outcome);
        }
    }

    fn idle_after(&self) -> Option<Duration> {
        Some(self.idle_after)
    }

    fn idle(&self) {
        (self.on_idle)();
    }
}
