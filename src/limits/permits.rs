//! Emission permits from a source shared beyond this process (a fleet-wide
//! rate in Redis, say), and the [`Permit`] guard that gives an unused permit
//! back when dropped.
//!
//! The drain takes one permit per emission, only when a job is waiting, and
//! spends it when the job goes out; a permit taken for a job that turned out
//! to be gone or expired is dropped, which gives it back. The drain never
//! blocks on the source: when none is available it awaits
//! [`PermitSource::ready`].

use async_trait::async_trait;

/// Emission permits shared beyond this process.
///
/// Implement [`try_take`](Self::try_take) (hand out a [`Permit`] made with
/// [`Permit::new`], or `None`), [`ready`](Self::ready), and, if an unused
/// permit should go back to the pool, [`give_back`](Self::give_back), which
/// the permit calls when it is dropped unspent.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Permit, PermitSource, Throttle};
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
///
/// /// Three permits, ever.
/// struct Three(AtomicU32);
///
/// #[async_trait::async_trait]
/// impl PermitSource for Three {
///     fn try_take(&self) -> Option<Permit<'_>> {
///         let taken = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
///         taken.is_ok().then(|| Permit::new(self))
///     }
///     fn give_back(&self) {
///         self.0.fetch_add(1, Ordering::AcqRel);
///     }
///     async fn ready(&self) {
///         std::future::pending::<()>().await
///     }
/// }
///
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .permits(Three(AtomicU32::new(3)))
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// for job in 0..5 {
///     throttle.try_submit(job).unwrap();
/// }
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(throttle.stats().delivered(), 3);
/// assert_eq!(throttle.depth(), 2, "the rest wait for permits");
/// # }
/// ```
#[async_trait]
pub trait PermitSource: Send + Sync + 'static {
    /// Takes one permit if one is available here and now. Never blocks.
    fn try_take(&self) -> Option<Permit<'_>>;

    /// Takes back a permit that was dropped unspent (called by [`Permit`]'s
    /// `Drop`; never call it yourself).
    fn give_back(&self) {}

    /// Resolves when [`try_take`](Self::try_take) may succeed again.
    async fn ready(&self);

    /// The drain's current local rate, jobs per second: told at start and on
    /// every change, so a source can size its leases.
    fn set_local_rate(&self, _jobs_per_second: f64) {}
}

/// One permit taken from a [`PermitSource`]: [`spend`](Self::spend) it, or
/// drop it to give it back.
///
/// ```
/// use dripfeed::{Permit, PermitSource};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// struct Pool(AtomicU32);
/// #[async_trait::async_trait]
/// impl PermitSource for Pool {
///     fn try_take(&self) -> Option<Permit<'_>> {
///         let taken = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
///         taken.is_ok().then(|| Permit::new(self))
///     }
///     fn give_back(&self) {
///         self.0.fetch_add(1, Ordering::AcqRel);
///     }
///     async fn ready(&self) {}
/// }
///
/// let pool = Pool(AtomicU32::new(1));
/// drop(pool.try_take()); // not spent: back in the pool
/// assert_eq!(pool.0.load(Ordering::Acquire), 1);
/// pool.try_take().unwrap().spend();
/// assert_eq!(pool.0.load(Ordering::Acquire), 0);
/// assert!(pool.try_take().is_none());
/// ```
#[must_use = "a permit dropped unspent goes back to its source"]
pub struct Permit<'a> {
    source: Option<&'a dyn PermitSource>,
}

impl<'a> Permit<'a> {
    /// A permit from `source`, given back to it if dropped unspent.
    pub fn new(source: &'a dyn PermitSource) -> Self {
        Permit {
            source: Some(source),
        }
    }

    /// Uses the permit: it is not given back.
    pub fn spend(mut self) {
        self.source = None;
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(source) = self.source.take() {
            source.give_back();
        }
    }
}

impl std::fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}

/// A source shared behind an `Arc` (e.g. one kept to read its counters) is a
/// source too.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Permit, PermitSource, Throttle};
/// use std::sync::Arc;
///
/// struct Unlimited;
/// #[async_trait::async_trait]
/// impl PermitSource for Unlimited {
///     fn try_take(&self) -> Option<Permit<'_>> {
///         Some(Permit::new(self))
///     }
///     async fn ready(&self) {}
/// }
///
/// let source: Arc<dyn PermitSource> = Arc::new(Unlimited);
/// let kept = source.clone();
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .permits(source)
///     .build(|_: &u8, _| async { Delivery::Done })
///     .unwrap();
/// assert!(kept.try_take().is_some());
/// # drop(throttle);
/// # }
/// ```
#[async_trait]
impl<T: PermitSource + ?Sized> PermitSource for std::sync::Arc<T> {
    fn try_take(&self) -> Option<Permit<'_>> {
        (**self).try_take()
    }

    fn give_back(&self) {
        (**self).give_back()
    }

    async fn ready(&self) {
        (**self).ready().await
    }

    fn set_local_rate(&self, jobs_per_second: f64) {
        (**self).set_local_rate(jobs_per_second)
    }
}
