//! One scheduler for many drains: a few driver tasks, each polling the
//! drain futures given to it (a [`FuturesUnordered`]), instead of a task
//! per active destination. Each drain keeps its own next emission time as
//! a tokio timer (the runtime's timer wheel), and a driver polls only the
//! drains whose timer fired or whose queue or deliveries woke them: ten
//! thousand destinations at 1/s each cost ten thousand polls a second,
//! spread over the drivers, and nothing while idle. A drain is still one
//! emitter deciding, in order, at the rate in force: only the task that
//! polls it changed.
//!
//! A drain never panics (a panicking downstream is caught and counted as
//! a failed delivery); should one anyway, it is caught here and ends that
//! drain alone, not the driver and the other drains on it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt as _;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

/// A drain as a driver runs it: it tells its end on `done`.
type Driven = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The driver tasks of a set.
pub(crate) struct Drivers {
    to: Vec<mpsc::UnboundedSender<Driven>>,
    next: AtomicUsize,
}

impl Drivers {
    /// `n` (at least 1) driver tasks on `runtime`. They end once the set
    /// is dropped and their drains have ended.
    pub(crate) fn start(n: usize, runtime: &tokio::runtime::Handle) -> Arc<Drivers> {
        let to = (0..n.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                runtime.spawn(drive(rx));
                tx
            })
            .collect();
        Arc::new(Drivers {
            to,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `drain` on the next driver, round robin; the receiver hears
    /// when it has ended. Should every driver be gone (a runtime shutting
    /// down), it is spawned as a task of its own.
    pub(crate) fn run(
        &self,
        drain: impl Future<Output = ()> + Send + 'static,
    ) -> oneshot::Receiver<()> {
        let (done, ended) = oneshot::channel();
        let driven: Driven = Box::pin(async move {
            // Caught: one drain's panic ends it alone.
            let _ = AssertUnwindSafe(drain).catch_unwind().await;
            let _ = done.send(());
        });
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.to.len();
        if let Err(mpsc::error::SendError(driven)) = self.to[i].send(driven) {
            tokio::spawn(driven);
        }
        ended
    }
}

/// One driver: takes new drains from `rx` and polls those woken, until
/// the set is gone and its drains have ended.
async fn drive(mut rx: mpsc::UnboundedReceiver<Driven>) {
    let mut drains: FuturesUnordered<Driven> = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            new = rx.recv(), if open => match new {
                Some(d) => drains.push(d),
                None => open = false,
            },
            Some(()) = drains.next(), if !drains.is_empty() => {}
            else => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn many_drains_run_on_few_tasks_and_a_panic_ends_one() {
        let drivers = Drivers::start(2, &tokio::runtime::Handle::current());
        let count = Arc::new(AtomicUsize::new(0));
        let mut ends = Vec::new();
        for i in 0..100u64 {
            let count = count.clone();
            ends.push(drivers.run(async move {
                tokio::time::sleep(Duration::from_millis(10 * i)).await;
                count.fetch_add(1, Ordering::Relaxed);
            }));
        }
        let bad = drivers.run(async { panic!("a drain that panics") });
        let metrics = tokio::runtime::Handle::current().metrics();
        assert!(metrics.num_alive_tasks() <= 3, "two drivers (and the test)");
        bad.await.expect("told of its end");
        for e in ends {
            e.await.expect("each ends");
        }
        assert_eq!(count.load(Ordering::Relaxed), 100, "the others ran on");
    }
}
