//! A count of the tasks waiting on a `Notify`, so whoever frees what they
//! wait for calls `notify_one` only when someone waits.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts one waiting task while it lives.
pub(crate) struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    /// Counts a waiter in `count` until dropped.
    pub(crate) fn new(count: &'a AtomicUsize) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
