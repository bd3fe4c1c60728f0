//! A fleet drain as it runs: on the relay's few driver tasks (one
//! scheduler for many drains, [`Drivers`]), not a task of its own, with
//! what its relay needs to know of it: whether it has ended, and a way to
//! wait for that.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dripfeed::destinations::Drivers;
use futures_util::FutureExt as _;
use tokio::sync::oneshot;

/// A drain as a driver runs it.
pub(super) struct Driven {
    /// Told once it has ended.
    ended: oneshot::Receiver<()>,
    /// Set once it has ended, or been dropped unfinished.
    done: Arc<AtomicBool>,
}

impl Driven {
    /// Runs `drain` on `drivers`.
    pub(super) fn run(
        drivers: &Drivers,
        drain: impl Future<Output = ()> + Send + 'static,
    ) -> Driven {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Done(done.clone());
        // A combinator, not an async block: one holding `drain` would
        // keep two copies of it.
        let ended = drivers.run(drain.map(move |()| drop(flag)));
        Driven { ended, done }
    }

    pub(super) fn is_finished(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits for its end.
    pub(super) async fn ended(self) {
        let _ = self.ended.await;
    }
}

/// Sets its flag when dropped: a drain's end, however it came.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}
