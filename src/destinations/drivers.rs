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
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

/// A drain as a driver runs it: it tells its end on `done`.
type Driven = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A few driver tasks that poll many long-lived futures (drains): one
/// scheduler for many, instead of a task each. What a
/// [`DestinationsBuilder::drivers`](super::DestinationsBuilder::drivers)
/// set runs its drains on (a set of its own); public so drains of your own
/// making (one per queue in a shared store, say) run on a few tasks too.
///
/// Each future keeps its own timers and wakers: a driver polls only those
/// woken. A panic in one, while it is polled or dropped, is caught and
/// ends that one alone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::destinations::Drivers;
/// use std::time::Duration;
/// let drivers = Drivers::start(2, &tokio::runtime::Handle::current());
/// let ends: Vec<_> = (0..1_000u64)
///     .map(|i| drivers.run(tokio::time::sleep(Duration::from_millis(i))))
///     .collect();
/// let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
/// assert!(tasks <= 2, "1,000 futures on two tasks");
/// for end in ends {
///     end.await.expect("each tells its end");
/// }
/// # }
/// ```
pub struct Drivers {
    to: Vec<mpsc::UnboundedSender<Driven>>,
    next: AtomicUsize,
}

impl Drivers {
    /// `n` (at least 1) driver tasks on `runtime`. They end once the set
    /// is dropped and their drains have ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let drivers = dripfeed::destinations::Drivers::start(0, &tokio::runtime::Handle::current());
    /// assert_eq!(drivers.len(), 1, "at least one");
    /// # }
    /// ```
    pub fn start(n: usize, runtime: &tokio::runtime::Handle) -> Arc<Drivers> {
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

    /// How many driver tasks the set has.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let drivers = dripfeed::destinations::Drivers::start(3, &tokio::runtime::Handle::current());
    /// assert_eq!(drivers.len(), 3);
    /// # }
    /// ```
    #[allow(clippy::len_without_is_empty)] // never empty
    pub fn len(&self) -> usize {
        self.to.len()
    }

    /// Runs `drain` on the next driver, round robin; the receiver hears
    /// when it has ended (panicked too: caught, it ends that drain alone).
    /// Should every driver be gone (a runtime shutting down), it is spawned
    /// as a task of its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let drivers = dripfeed::destinations::Drivers::start(1, &tokio::runtime::Handle::current());
    /// let (tx, rx) = tokio::sync::oneshot::channel();
    /// let ended = drivers.run(async move {
    ///     let _ = tx.send(7);
    /// });
    /// ended.await.expect("told of its end");
    /// assert_eq!(rx.await, Ok(7));
    /// # }
    /// ```
    pub fn run(&self, drain: impl Future<Output = ()> + Send + 'static) -> oneshot::Receiver<()> {
        let (done, ended) = oneshot::channel();
        // Caught: one drain's panic ends it alone, whether it comes from a
        // poll or from dropping what it held. Boxed, not moved into an
        // async block, which would keep two copies of it.
        let mut drain: Option<Driven> = Some(Box::pin(drain));
        let mut done = Some(done);
        let driven: Driven = Box::pin(std::future::poll_fn(move |cx| {
            let polled = catch_unwind(AssertUnwindSafe(|| match drain.as_mut() {
                Some(d) => d.as_mut().poll(cx),
                None => Poll::Ready(()),
            }));
            if let Ok(Poll::Pending) = polled {
                return Poll::Pending;
            }
            let gone = drain.take();
            let _ = catch_unwind(AssertUnwindSafe(move || drop(gone)));
            if let Some(done) = done.take() {
                let _ = done.send(());
            }
            Poll::Ready(())
        }));
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.to.len();
        if let Err(mpsc::error::SendError(driven)) = self.to[i].send(driven) {
            tokio::spawn(driven);
        }
        ended
    }
}

impl std::fmt::Debug for Drivers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drivers")
            .field("tasks", &self.to.len())
            .finish()
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
        // One whose end is fine but whose drop panics: caught too.
        struct Bomb;
        impl Future for Bomb {
            type Output = ();
            fn poll(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
                Poll::Ready(())
            }
        }
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("a drain whose drop panics");
            }
        }
        let dropped = drivers.run(Bomb);
        let metrics = tokio::runtime::Handle::current().metrics();
        assert!(metrics.num_alive_tasks() <= 3, "two drivers (and the test)");
        bad.await.expect("told of its end");
        dropped.await.expect("told of its end");
        for e in ends {
            e.await.expect("each ends");
        }
        assert_eq!(count.load(Ordering::Relaxed), 100, "the others ran on");
    }
}
