//! A tower [`Layer`] that makes every request wait for a drain slot
//! (feature `tower`).
//!
//! Unlike tower's `RateLimit`, whose state lives in each clone (so N clones
//! silently allow N times the limit), every clone of a [`ThrottleService`]
//! shares one [`Slots`]. `poll_ready` is always ready: the slot is awaited
//! inside the response future, and only then is the inner service made
//! ready and called, so a caller that polls ready and never calls holds
//! nothing, and capacity the inner service reserves (a connection, a
//! concurrency permit) is never held while a request queues.
//!
//! By default a request waits for its slot however long the queue is, first
//! in, first out, as with tower's `RateLimit` + `Buffer` or governor's
//! `until_ready`; [`ThrottleLayer::max_wait`] bounds the wait and
//! [`ThrottleLayer::refuse_when_full`] refuses at once when the queue is
//! full. Errors stay typed: [`ThrottleError::Rejected`] (no slot in time,
//! queue full or closed, with a wait hint) or [`ThrottleError::Inner`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tower::{Layer, Service};

use crate::admission::rejected::Rejected;
use crate::client::slots::Slots;
use crate::drain::downstream::Delivery;

/// Wraps services so each request waits for a slot from shared [`Slots`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::Slots;
/// use dripfeed::tower::ThrottleLayer;
/// use std::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
///
/// let (slots, _drain) = Slots::builder().drain_rate(10.0).capacity(100).build_slots().unwrap();
/// let echo = tower::service_fn(|req: u32| async move { Ok::<_, std::convert::Infallible>(req * 2) });
/// let mut svc = ThrottleLayer::new(slots).layer(echo);
/// let start = tokio::time::Instant::now();
/// for i in 0..3 {
///     assert_eq!(svc.ready().await.unwrap().call(i).await.unwrap(), i * 2);
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(200)); // 10 per second
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ThrottleLayer {
    slots: Slots,
    wait: Wait,
}

/// How a request waits for its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// However long it takes.
    Forever,
    /// At most this long.
    AtMost(Duration),
    /// Not at all when the queue is full.
    Never,
}

impl ThrottleLayer {
    /// A layer whose services all draw from `slots`; requests wait for
    /// their slot however long it takes, first in, first out.
    pub fn new(slots: Slots) -> Self {
        ThrottleLayer {
            slots,
            wait: Wait::Forever,
        }
    }

    /// A request waits at most `deadline` for its slot, then fails with
    /// [`ThrottleError::Rejected`] (`Overloaded`, with a wait hint).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Reason, Slots};
    /// use dripfeed::tower::{ThrottleError, ThrottleLayer};
    /// use std::time::Duration;
    /// use tower::{Layer, ServiceExt};
    /// let (slots, _drain) = Slots::builder().drain_rate(1.0).build_slots().unwrap();
    /// let svc = ThrottleLayer::new(slots)
    ///     .max_wait(Duration::from_millis(500))
    ///     .layer(tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) }));
    /// assert!(svc.clone().oneshot(()).await.is_ok()); // at once
    /// match svc.oneshot(()).await {
    ///     Err(ThrottleError::Rejected(r)) => assert_eq!(r.reason(), Reason::Overloaded),
    ///     _ => panic!("the next slot is 1 s away"),
    /// }
    /// # }
    /// ```
    pub fn max_wait(mut self, deadline: Duration) -> Self {
        self.wait = Wait::AtMost(deadline);
        self
    }

    /// A request finding the queue full fails at once with
    /// [`ThrottleError::Rejected`] (`Overloaded`, with a wait hint) instead
    /// of waiting for room.
    pub fn refuse_when_full(mut self) -> Self {
        self.wait = Wait::Never;
        self
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = ThrottleService<S>;

    fn layer(&self, inner: S) -> ThrottleService<S> {
        ThrottleService {
            inner,
            slots: self.slots.clone(),
            wait: self.wait,
        }
    }
}

/// A service whose requests wait for a drain slot; clones share the slots.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::Slots;
/// use dripfeed::tower::{ThrottleLayer, ThrottleService};
/// use std::time::Duration;
/// use tower::{Layer, ServiceExt};
/// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
/// let echo = tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n * 2) });
/// let svc: ThrottleService<_> = ThrottleLayer::new(slots).layer(echo);
/// let start = tokio::time::Instant::now();
/// for n in 0..3 {
///     assert_eq!(svc.clone().oneshot(n).await.ok(), Some(n * 2));
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(200), "10 calls a second");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ThrottleService<S> {
    inner: S,
    slots: Slots,
    wait: Wait,
}

/// A [`ThrottleService`] error: refused by the throttle, or the inner error.
///
/// ```
/// use dripfeed::tower::ThrottleError;
/// let e: ThrottleError<std::io::Error> = ThrottleError::Inner(std::io::Error::other("down"));
/// assert_eq!(e.to_string(), "down");
/// ```
pub enum ThrottleError<E> {
    /// No slot: the queue is full (with `retry_after`) or closed.
    Rejected(Rejected<()>),
    /// The inner service failed.
    Inner(E),
}

impl<E: fmt::Debug> fmt::Debug for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleError::Rejected(r) => f.debug_tuple("Rejected").field(r).finish(),
            ThrottleError::Inner(e) => f.debug_tuple("Inner").field(e).finish(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleError::Rejected(r) => r.fmt(f),
            ThrottleError::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ThrottleError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ThrottleError::Rejected(r) => Some(r),
            ThrottleError::Inner(e) => Some(e),
        }
    }
}

impl<S, Req> Service<Req> for ThrottleService<S>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = ThrottleError<S::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Self::Error>> + Send>>;

    /// Always ready: the throttle decides in `call`. The inner service is
    /// made ready only once the request has its slot, so capacity it
    /// reserves (a connection, a concurrency permit) is never held while the
    /// request queues.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let mut inner = self.inner.clone();
        let slots = self.slots.clone();
        let wait = self.wait;
        Box::pin(async move {
            let slot = match wait {
                Wait::Forever => slots.acquire().await,
                Wait::AtMost(deadline) => slots.acquire_within(deadline).await,
                Wait::Never => slots.try_acquire().await,
            };
            let slot = slot.map_err(ThrottleError::Rejected)?;
            if let Err(e) = std::future::poll_fn(|cx| inner.poll_ready(cx)).await {
                slot.report(Delivery::Failed);
                return Err(ThrottleError::Inner(e));
            }
            let out = inner.call(req).await;
            slot.report(match &out {
                Ok(_) => Delivery::Done,
                Err(_) => Delivery::Failed,
            });
            out.map_err(ThrottleError::Inner)
        })
    }
}
