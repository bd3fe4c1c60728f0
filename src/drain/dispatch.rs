//! Dispatch: each delivery runs as its own task under an in-flight permit.
//!
//! The task owns the job and lends it to the downstream, so whatever the
//! downstream does (fail, hang past `deliver_timeout`, panic) the job is
//! still here afterwards to be counted and put in its place.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
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

/// Spawns the delivery of `job`; the permit is held until it is accounted.
pub(crate) fn spawn<J: Send + Sync + 'static>(
    shared: Arc<Shared<J>>,
    downstream: Arc<dyn Downstream<J>>,
    job: J,
    id: u64,
    permit: OwnedSemaphorePermit,
) {
    bump(&shared.counters.in_flight);
    tokio::spawn(async move {
        let started = Instant::now();
        let ended = attempt(
            &*downstream,
            &job,
            Attempt::new(id, 1),
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
                shared.give_up(job, DeadLetterReason::Failed, Outcome::Failed);
            }
        }
        shared
            .counters
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        drop(permit);
    });
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
