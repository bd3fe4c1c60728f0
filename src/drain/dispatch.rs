//! Dispatch: each delivery runs as its own task under an in-flight permit.
//!
//! The task owns the job and lends it to the downstream, so whatever the
//! downstream does (fail, hang past `deliver_timeout`, panic) the job is
//! still here afterwards to be counted and put in its place.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::downstream::{Attempt, Delivery, Downstream};
use crate::drain::adapt::Sample;
use crate::outcome::{Outcome, bump};
use crate::overflow::DeadLetterReason;
use crate::shared::Shared;

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Answered(Delivery),
    TimedOut,
    Panicked,
}

/// Polls a future, turning a panic into `Err(())`.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

/// Runs one attempt: the downstream borrows the job; bounded by `timeout`;
/// a panic (even one raised while creating the future) is caught.
pub(crate) async fn attempt<J: Sync + 'static>(
    downstream: &dyn Downstream<J>,
    job: &J,
    attempt: Attempt,
    timeout: std::time::Duration,
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
    pub(crate) job: J,
    pub(crate) id: u64,
    pub(crate) attempt: u32,
    pub(crate) deadline_ns: u64,
}

/// Spawns one delivery attempt; the permit is held until it is accounted.
pub(crate) fn spawn<J: Send + Sync + 'static>(
    shared: Arc<Shared<J>>,
    downstream: Arc<dyn Downstream<J>>,
    job: Job<J>,
    permit: OwnedSemaphorePermit,
) {
    bump(&shared.counters.in_flight);
    tokio::spawn(async move {
        let Job {
            job,
            id,
            attempt: number,
            deadline_ns,
        } = job;
        let started = Instant::now();
        let ended = attempt(
            &*downstream,
            &job,
            Attempt::new(id, number),
            shared.cfg.deliver_timeout,
        )
        .await;
        let latency = started.elapsed();
        shared.metrics.delivery.record(latency.as_secs_f64());
        if let Some(samples) = shared
            .samples
            .as_ref()
            .filter(|_| shared.cfg.sample_deliveries)
        {
            // Full: the window has plenty; dropping a sample loses no job.
            let _ = samples.push(Sample {
                at: Instant::now(),
                latency,
                ended,
            });
        }
        match ended {
            Ended::Answered(Delivery::Done) => shared.finish(Outcome::Delivered),
            failed => {
                if failed == Ended::Panicked {
                    tracing::error!(throttle = %shared.cfg.name, id, "delivery panicked");
                }
                bump(&shared.counters.delivery_failures);
                shared.metrics.delivery_failures.increment(1);
                if let Err(job) = retry(&shared, failed, job, id, number, deadline_ns) {
                    shared.give_up(
                        job,
                        DeadLetterReason::Failed { attempts: number },
                        Outcome::Failed,
                    );
                }
            }
        }
        shared.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
        drop(permit);
    });
}

/// Schedules another attempt when the failure is worth retrying and
/// attempts remain; hands the job back otherwise (or when the delay
/// structure is full).
fn retry<J>(
    shared: &Shared<J>,
    ended: Ended,
    job: J,
    id: u64,
    number: u32,
    deadline_ns: u64,
) -> Result<(), J> {
    let Some(retries) = &shared.retries else {
        return Err(job);
    };
    let hint = match ended {
        Ended::Answered(Delivery::Failed) => return Err(job), // not worth retrying
        Ended::Answered(Delivery::Retry { after }) => after,
        _ => None,
    };
    if number >= retries.policy.max_attempts() {
        return Err(job);
    }
    let delay = retries.policy.delay(number + 1, hint, fastrand::f64());
    let due = shared
        .clock
        .ns(Instant::now())
        .saturating_add(u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX));
    // Count it waiting before it stops counting in flight.
    bump(&shared.counters.retry_wait);
    match retries.push(job, id, number + 1, due, deadline_ns) {
        Ok(()) => {
            bump(&shared.counters.retried);
            shared.wake.notify_one(); // the drain may be asleep with nothing else due
            Ok(())
        }
        Err(job) => {
            shared.counters.retry_wait.fetch_sub(1, Ordering::Relaxed);
            Err(job)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
