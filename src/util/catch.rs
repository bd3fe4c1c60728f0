//! Running user code (hooks, sinks, deliveries) so that a panic in it is
//! caught and reported, never propagated into the drain task.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `f`, turning a panic into `None` (logged with `what` and the throttle's name).
pub(crate) fn guarded<T>(name: &str, what: &'static str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(out) => Some(out),
        Err(_) => {
            tracing::error!(throttle = %name, "{what} panicked");
            None
        }
    }
}

/// Polls a future, turning a panic (even one raised while it is created
/// inside the future) into `Err(())`. The future is pinned by the caller
/// (`Box::pin`, or `std::pin::pin!` where no allocation is wanted).
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = Pin::new(&mut self.0);
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_none() {
        assert_eq!(guarded("t", "hook", || 3), Some(3));
        assert_eq!(guarded("t", "hook", || -> u8 { panic!("boom") }), None);
    }

    #[tokio::test]
    async fn a_panicking_future_becomes_err() {
        let ok = CatchUnwind(Box::pin(async { 1 })).await;
        assert_eq!(ok, Ok(1));
        let on_stack = CatchUnwind(std::pin::pin!(async { 2 })).await;
        assert_eq!(on_stack, Ok(2));
        let bad = CatchUnwind(Box::pin(async {
            tokio::task::yield_now().await;
            panic!("later")
        }))
        .await;
        assert_eq!(bad, Err::<(), ()>(()));
    }
}
