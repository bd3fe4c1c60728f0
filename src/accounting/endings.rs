//! Where jobs the throttle gives up on go: the dead-letter sink, else the
//! hook for their outcome. Each hand-off is counted in the ledger as the
//! job's one terminal outcome.
//!
//! Sinks and hooks are user code: in the drain, a panic in one is caught,
//! logged and the job counted under the outcome it would have had without a
//! sink (it is gone with the panic), so a faulty sink can never stop the
//! drain or hang a shutdown.

use std::sync::Arc;

use crate::accounting::dead_letter::{DeadLetterReason, DeadLetterSink};
use crate::accounting::ledger::{Event, Ledger};
use crate::accounting::outcome::Outcome;
use crate::util::catch::{CatchUnwind, guarded};

/// A hook that takes a job the throttle gives up on.
pub(crate) type Hook<J> = Arc<dyn Fn(J) + Send + Sync>;

/// What a sink did with an offered job.
pub(crate) enum Offer<J> {
    /// Stored (counted as dead-lettered).
    Taken,
    /// Handed back: full, closed, or there is no sink.
    Refused(J),
    /// The sink panicked; the job went with the panic.
    Lost,
}

pub(crate) struct Endings<J> {
    pub(crate) name: String,
    pub(crate) sink: Option<Arc<dyn DeadLetterSink<J>>>,
    pub(crate) on_evicted: Option<Hook<J>>,
    pub(crate) on_expired: Option<Hook<J>>,
    pub(crate) on_failed: Option<Hook<J>>,
}

impl<J: 'static> Endings<J> {
    /// Offers `job` to the sink, catching a panic in it; a taken job is
    /// counted as dead-lettered.
    pub(crate) fn offer(
        &self,
        ledger: &Ledger,
        id: u64,
        job: J,
        why: DeadLetterReason,
    ) -> Offer<J> {
        let Some(sink) = &self.sink else {
            return Offer::Refused(job);
        };
        match guarded(&self.name, "the dead-letter sink", || {
            sink.try_offer(job, why)
        }) {
            Some(Ok(())) => {
                ledger.record(Event::Finished(id, Outcome::DeadLettered));
                Offer::Taken
            }
            Some(Err(job)) => Offer::Refused(job),
            None => Offer::Lost,
        }
    }

    /// Gives up on a job: to the sink if it takes it (`true`), else to the
    /// hook for `outcome`, counted as `outcome`.
    pub(crate) fn give_up(
        &self,
        ledger: &Ledger,
        id: u64,
        job: J,
        why: DeadLetterReason,
        outcome: Outcome,
    ) -> bool {
        match self.offer(ledger, id, job, why) {
            Offer::Taken => return true,
            Offer::Lost => ledger.record(Event::Finished(id, outcome)),
            Offer::Refused(job) => {
                ledger.record(Event::Finished(id, outcome));
                let hook = match outcome {
                    Outcome::Evicted => &self.on_evicted,
                    Outcome::Expired => &self.on_expired,
                    _ => &self.on_failed,
                };
                if let Some(hook) = hook {
                    guarded(&self.name, "a job hook", || hook(job));
                }
            }
        }
        false
    }

    /// Hands an evicted job to `on_evicted` (never to the sink: eviction is
    /// head-drop's promise).
    pub(crate) fn evict(&self, ledger: &Ledger, id: u64, job: J) {
        ledger.record(Event::Finished(id, Outcome::Evicted));
        if let Some(hook) = &self.on_evicted {
            guarded(&self.name, "a job hook", || hook(job));
        }
    }

    /// Waits until the sink has stored what it took (shutdown); `false`
    /// when it says it could not (or panicked): the journal then keeps the
    /// dead-lettered jobs it has not ended.
    pub(crate) async fn flush(&self) -> bool {
        let Some(sink) = &self.sink else {
            return true;
        };
        match CatchUnwind(Box::pin(sink.flush())).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::error!(throttle = %self.name, error = %e, "the dead-letter sink could not store its jobs as the throttle closed");
                false
            }
            Err(_) => {
                tracing::error!(throttle = %self.name, "the dead-letter sink's flush panicked");
                false
            }
        }
    }
}
