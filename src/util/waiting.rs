//! Waiting on a `Notify` for something another task frees (a place in the
//! queue, a delivery place), with a count of the waiters so whoever frees
//! calls `notify_one` only when someone waits.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Counts one waiting task while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether any task waits.
pub(crate) fn any(count: &AtomicUsize) -> bool {
    count.load(Ordering::SeqCst) > 0
}

/// Tries `ready` until it gives a value, waiting on `freed` between tries,
/// counted in `count` while it waits. Cancel-safe: dropped, it holds
/// nothing and is no longer counted. The freeing side frees first, then
/// calls `notify_one` if [`any`] waits: a waiter counted before its second
/// try is either served by that try or woken.
pub(crate) async fn until<T>(
    count: &AtomicUsize,
    freed: &Notify,
    mut ready: impl FnMut() -> Option<T>,
) -> T {
    loop {
        if let Some(value) = ready() {
            return value;
        }
        let _waiting = Waiting::new(count);
        let woken = freed.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // What is waited for may have been freed before this task was counted.
        if let Some(value) = ready() {
            return value;
        }
        woken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_while_alive() {
        let count = AtomicUsize::new(0);
        let a = Waiting::new(&count);
        let b = Waiting::new(&count);
        assert!(any(&count));
        drop(a);
        assert!(any(&count));
        drop(b);
        assert!(!any(&count));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_is_counted_until_it_is_served() {
        let state = Arc::new((AtomicUsize::new(0), Notify::new(), AtomicUsize::new(0)));
        let waiter = {
            let state = state.clone();
            tokio::spawn(async move {
                let (count, freed, free) = &*state;
                until(count, freed, || {
                    (free.load(Ordering::SeqCst) > 0).then_some("served")
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        let (count, freed, free) = &*state;
        assert!(any(count), "counted while it waits");
        free.store(1, Ordering::SeqCst);
        if any(count) {
            freed.notify_one();
        }
        assert_eq!(waiter.await.ok(), Some("served"));
        assert!(!any(count), "no longer counted");
    }
}
