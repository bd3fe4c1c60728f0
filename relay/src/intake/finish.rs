//! A request's admission runs to its end even if its client hangs up: a
//! handler dropped half way (the journal's fsync or a shared store awaited)
//! would keep a place of the set, a live journal record and an idempotency
//! key in "admitting" with no webhook behind them.
//!
//! [`Finish`] polls the admission in the handler's own task (no task of
//! its own per request, no hop to another worker and back) and, if the
//! handler is dropped before the admission ended, hands what is left of it
//! to a task of its own, which ends it.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// The admission `F`, finished in a task of its own if dropped unfinished;
/// its output, or `None` if it panicked (caught, as a task's panic is).
pub(super) struct Finish<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fut: Option<Pin<Box<F>>>,
}

impl<F> Finish<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// Wraps `fut`.
    pub(super) fn new(fut: F) -> Self {
        Finish {
            fut: Some(Box::pin(fut)),
        }
    }
}

impl<F> Future for Finish<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(None);
        };
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                self.fut = None;
                Poll::Ready(Some(out))
            }
            Err(_) => {
                self.fut = None;
                Poll::Ready(None)
            }
        }
    }
}

impl<F> Drop for Finish<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(rest) = self.fut.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(rest)),
                // Dropped off the runtime (only at its teardown): nothing
                // can run it, as a task would be cancelled then too.
                Err(_) => tracing::warn!("an admission was dropped unfinished off the runtime"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_dropped_admission_still_ends_and_a_finished_one_is_not_run_again() {
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let admission = Finish::new(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // The client hangs up: the handler is dropped while it waits.
        let dropped = tokio::time::timeout(Duration::from_millis(10), admission).await;
        assert!(dropped.is_err(), "still waiting when dropped");
        assert!(!ended.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(ended.load(Ordering::SeqCst), "ended in a task of its own");

        let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let count = runs.clone();
        let out = Finish::new(async move {
            count.fetch_add(1, Ordering::SeqCst);
            7
        })
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!((out, runs.load(Ordering::SeqCst)), (Some(7), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panic_is_caught_as_none() {
        let out = Finish::new(async {
            if std::hint::black_box(true) {
                panic!("a bug in the request path");
            }
            1
        })
        .await;
        assert_eq!(out, None);
    }
}
