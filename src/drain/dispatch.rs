//! Dispatch: each delivery runs as its own task under an in-flight permit.
//!
//! The task owns the job and lends it to the downstream, so whatever the
//! downstream does (fail, hang past `deliver_timeout`, panic) the job is
//! still here afterwards to be counted and put in its place: delivered,
//! scheduled for a retry, or given up on.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::admission::Entry;
use crate::catch::CatchUnwind;
use crate::downstream::{Attempt, Delivery, Downstream};
use crate::feedback::Ended;
use crate::inflight::InFlightPermit;
use crate::ledger::Event;
use crate::num::nanos;
use crate::outcome::Outcome;
use crate::overflow::DeadLetterReason;
use crate::shared::Shared;

/// Runs one attempt: the downstream borrows the job; bounded by `timeout`;
/// a panic (even one raised while creating the future) is caught.
pub(crate) async fn attempt<J: Sync + 'static>(
    downstream: &dyn Downstream<J>,
    job: &J,
    attempt: Attempt,
    timeout: Duration,
) -> Ended {
    let call = async { tokio::time::timeout(timeout, downstream.deliver(job, attempt)).await };
    match CatchUnwind(Box::pin(call)).await {
        Ok(Ok(delivery)) => Ended::Answered(delivery),
        Ok(Err(_elapsed)) => Ended::TimedOut,
        Err(()) => Ended::Panicked,
    }
}

/// A job on its way to the downstream.
pub(crate) struct Job<J> {
    pub(crate) entry: Entry<J>,
    /// 1 for the first attempt.
    pub(crate) attempt: u32,
}

/// Spawns one delivery attempt; the permit is held until it is accounted.
/// `report` says whether the attempt feeds the adaptive window.
pub(crate) fn spawn<J: Send + Sync + 'static>(
    shared: Arc<Shared<J>>,
    downstream: Arc<dyn Downstream<J>>,
    job: Job<J>,
    permit: InFlightPermit,
    report: bool,
) {
    tokio::spawn(async move {
        let Job {
            entry,
            attempt: number,
        } = job;
        let s = &*shared;
        let started = Instant::now();
        let ended = attempt(
            &*downstream,
            &entry.job,
            Attempt::new(entry.id, number),
            s.cfg.deliver_timeout,
        )
        .await;
        s.ledger.record(Event::Attempted {
            latency: started.elapsed(),
            failed: !ended.is_done(),
        });
        if report && let Some(feedback) = &s.feedback {
            feedback.report(started, ended);
        }
        if ended.is_done() {
            s.ledger.record(Event::Finished(Outcome::Delivered));
        } else {
            if ended == Ended::Panicked {
                tracing::error!(throttle = %s.cfg.name, id = entry.id, "delivery panicked");
            }
            if let Err(entry) = retry(s, ended, entry, number) {
                let why = DeadLetterReason::Failed { attempts: number };
                s.endings
                    .give_up(&s.ledger, entry.job, why, Outcome::Failed);
            }
        }
        s.ledger.record(Event::Landed);
        drop(permit);
        if s.closing_deadline().is_some() {
            // A closing drain waits for the deliveries still running.
            s.admission.wake_drain();
        }
    });
}

/// Schedules another attempt when the failure is worth retrying and
/// attempts remain; hands the entry back otherwise (or when the delay
/// structure is full).
fn retry<J>(s: &Shared<J>, ended: Ended, entry: Entry<J>, number: u32) -> Result<(), Entry<J>> {
    let Some(retries) = &s.retries else {
        return Err(entry);
    };
    let hint = match ended {
        Ended::Answered(Delivery::Failed) => return Err(entry), // not worth retrying
        Ended::Answered(Delivery::Retry { after }) => after,
        _ => None,
    };
    if number >= retries.policy.max_attempts() {
        return Err(entry);
    }
    let delay = retries.policy.delay(number + 1, hint, fastrand::f64());
    let due = s.clock.ns(Instant::now()).saturating_add(nanos(delay));
    retries.push(entry, number + 1, due)?;
    s.ledger.record(Event::Retried);
    s.admission.wake_drain(); // the drain may be asleep with nothing else due
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn panics_and_hangs_become_endings() {
        let panicking = |_: &u8, _: Attempt| -> std::future::Ready<Delivery> { panic!("boom") };
        let ended = attempt(&panicking, &1, Attempt::new(0, 1), Duration::from_secs(1)).await;
        assert_eq!(ended, Ended::Panicked);

        let panics_later = |_: &u8, _: Attempt| async {
            tokio::task::yield_now().await;
            panic!("later")
        };
        let ended = attempt(
            &panics_later,
            &1,
            Attempt::new(0, 1),
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(ended, Ended::Panicked);

        let hangs = |_: &u8, _: Attempt| std::future::pending::<Delivery>();
        let ended = attempt(&hangs, &1, Attempt::new(0, 1), Duration::from_secs(1)).await;
        assert_eq!(ended, Ended::TimedOut);

        let fine = |_: &u8, _: Attempt| async { Delivery::Done };
        let ended = attempt(&fine, &1, Attempt::new(0, 1), Duration::from_secs(1)).await;
        assert_eq!(ended, Ended::Answered(Delivery::Done));
    }
}
