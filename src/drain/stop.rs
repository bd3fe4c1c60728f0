//! The word a closing drain gives its deliveries still running when its
//! deadline comes: each stops where it is (its downstream call dropped,
//! as a timeout drops it), and its job is handed off as a queued one is
//! (kept in the journal for the next start, else dead-lettered or handed
//! back), so a shutdown ends within its grace whatever the downstream
//! does.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Fired once, at a closing drain's deadline.
#[derive(Default)]
pub(crate) struct Stop {
    fired: AtomicBool,
    notify: Notify,
}

impl Stop {
    /// Tells every delivery still running to stop.
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Resolves once [`fire`](Self::fire) was called (at once if it was).
    pub(crate) async fn fired(&self) {
        loop {
            let mut woken = pin!(self.notify.notified());
            woken.as_mut().enable();
            if self.fired.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn a_waiter_before_or_after_the_fire_hears_it() {
        let stop = Arc::new(Stop::default());
        let early = tokio::spawn({
            let stop = stop.clone();
            async move { stop.fired().await }
        });
        tokio::task::yield_now().await;
        assert!(!early.is_finished());
        stop.fire();
        early.await.unwrap();
        // Fired already: at once.
        tokio::time::timeout(std::time::Duration::from_millis(1), stop.fired())
            .await
            .expect("fired before the wait began");
    }
}
