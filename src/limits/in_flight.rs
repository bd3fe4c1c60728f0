//! The in-flight bound: how many deliveries may run at once, as a budget of
//! guards. A throttle's own budget may sit inside an [`InFlightBudget`]
//! shared by several throttles (one bound across destinations). Each delivery holds an
//! [`InFlightPermit`] until it is accounted; dropping the permit frees the
//! place.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::admission::places::Reservations;
use crate::util::waiting;

/// A budget of deliveries running at once, optionally inside a larger
/// budget shared with other throttles (a destination's cap inside the set's
/// budget): a place is taken in both or in neither.
#[derive(Clone)]
pub(crate) struct InFlight {
    own: Arc<Own>,
    parent: Option<Arc<Semaphore>>,
}

/// A budget of deliveries running at once that several throttles share:
/// give it to each with
/// [`ThrottleBuilder::shared_in_flight`](crate::ThrottleBuilder::shared_in_flight).
/// Every delivery then takes a place in its throttle's own
/// `max_in_flight` *and* in this budget, or waits; so a throttle whose
/// receiver hangs holds at most its own cap, and the rest stays for the
/// others. Clones share the budget.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, InFlightBudget, Throttle};
/// use std::time::Duration;
/// let budget = InFlightBudget::new(3);
/// let hangs = |_: &u32, _| std::future::pending::<Delivery>();
/// let (dead, _d) = Throttle::builder()
///     .drain_rate(100.0)
///     .max_in_flight(2)
///     .shared_in_flight(&budget)
///     .build(hangs)
///     .unwrap();
/// for job in 0..5 {
///     dead.try_submit(job).unwrap();
/// }
/// tokio::time::sleep(Duration::from_millis(100)).await;
/// assert_eq!(dead.stats().in_flight(), 2, "its own cap");
/// assert_eq!(budget.available(), 1, "one place left for the others");
/// # }
/// ```
#[derive(Clone)]
pub struct InFlightBudget {
    sem: Arc<Semaphore>,
}

impl InFlightBudget {
    /// A budget of `max` deliveries at once (at least 1).
    pub fn new(max: usize) -> Self {
        InFlightBudget {
            sem: Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))),
        }
    }

    /// Places free now.
    pub fn available(&self) -> usize {
        self.sem.available_permits()
    }
}

impl std::fmt::Debug for InFlightBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightBudget")
            .field("available", &self.available())
            .finish()
    }
}

/// A throttle's own places: the bounded count admission uses for the
/// queue ([`Reservations`]), and a wake-up for whoever waits for one.
/// Taking a place is one compare-and-swap and freeing it one subtraction
/// (a semaphore takes a lock on every release).
struct Own {
    places: Reservations,
    /// Only the drain task takes and frees places (`Dispatch::Inline`:
    /// it polls the deliveries itself): counted without atomic
    /// read-modify-writes.
    one_task: bool,
    freed: Notify,
    waiters: AtomicUsize,
}

impl Own {
    fn try_take(&self) -> bool {
        match self.one_task {
            true => self.places.try_reserve_alone().is_ok(),
            false => self.places.try_reserve().is_ok(),
        }
    }

    fn free(&self) {
        match self.one_task {
            true => self.places.release_alone(),
            false => self.places.release(),
        };
        if waiting::any(&self.waiters) {
            self.freed.notify_one();
        }
    }
}

/// One delivery's place in the budget (and in the shared one), freed on drop.
pub(crate) struct InFlightPermit {
    /// `None` once freed by [`free`](Self::free).
    own: Option<Arc<Own>>,
    _shared: Option<OwnedSemaphorePermit>,
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        if let Some(own) = &self.own {
            own.free();
        }
    }
}

/// A permit's reference to its budget, kept after the permit freed its
/// place: the next permit reuses it ([`InFlight::try_acquire_with`])
/// rather than taking a reference of its own (two atomic operations per
/// delivery).
pub(crate) struct Spare(Arc<Own>);

impl InFlightPermit {
    /// Frees the place now and keeps the reference for the next permit.
    pub(crate) fn free(mut self) -> Option<Spare> {
        let own = self.own.take()?;
        own.free();
        Some(Spare(own))
    }
}

impl InFlight {
    /// A budget of `max` deliveries (at least 1); `one_task`: only the
    /// drain task takes and frees its places (`Dispatch::Inline`).
    pub(crate) fn new(max: u32, one_task: bool) -> Self {
        InFlight {
            own: Arc::new(Own {
                places: Reservations::new(max as usize),
                one_task,
                freed: Notify::new(),
                waiters: AtomicUsize::new(0),
            }),
            parent: None,
        }
    }

    /// A budget of `max` of its own inside `shared`'s places.
    pub(crate) fn within(max: u32, shared: &InFlightBudget, one_task: bool) -> Self {
        InFlight {
            parent: Some(shared.sem.clone()),
            ..InFlight::new(max, one_task)
        }
    }

    /// A place now, if one is free here and in the shared budget.
    #[cfg(test)]
    pub(crate) fn try_acquire(&self) -> Option<InFlightPermit> {
        self.try_acquire_with(None)
    }

    /// Takes a place if one is free (and the shared budget's, if any),
    /// reusing `spare` (a freed permit's reference to this budget) when
    /// given one.
    pub(crate) fn try_acquire_with(&self, spare: Option<Spare>) -> Option<InFlightPermit> {
        if !self.own.try_take() {
            return None;
        }
        let own = match spare {
            Some(Spare(own)) if Arc::ptr_eq(&own, &self.own) => own,
            _ => self.own.clone(),
        };
        let shared = match &self.parent {
            Some(parent) => match parent.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    own.free();
                    return None;
                }
            },
            None => None,
        };
        Some(InFlightPermit {
            own: Some(own),
            _shared: shared,
        })
    }

    /// Waits for a place here, then in the shared budget.
    pub(crate) async fn acquire(&self) -> Option<InFlightPermit> {
        let own = &*self.own;
        waiting::until(&own.waiters, &own.freed, || own.try_take().then_some(())).await;
        // The place is ours from here: a permit frees it if the wait for
        // the shared budget is dropped.
        let mut permit = InFlightPermit {
            own: Some(self.own.clone()),
            _shared: None,
        };
        if let Some(parent) = &self.parent {
            permit._shared = Some(parent.clone().acquire_owned().await.ok()?);
        }
        Some(permit)
    }

    /// Places free in the budget (not counting the shared one).
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.own.places.bound() - self.own.places.taken()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn places_are_guards() {
        let budget = InFlight::new(2, false);
        let a = budget.try_acquire();
        let b = budget.try_acquire();
        assert!(a.is_some() && b.is_some());
        assert!(budget.try_acquire().is_none());
        drop(a);
        let a = budget.try_acquire();
        assert!(a.is_some(), "a dropped permit frees its place");
        let shared = budget.clone();
        let waiter = tokio::spawn(async move { shared.acquire().await.is_some() });
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "a clone shares the budget: a and b hold it"
        );
        drop(b);
        assert_eq!(waiter.await.ok(), Some(true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cap_inside_a_shared_budget() {
        let shared = InFlightBudget::new(3);
        let dead = InFlight::within(2, &shared, false);
        let live = InFlight::within(2, &shared, false);
        let d1 = dead.try_acquire();
        let d2 = dead.try_acquire();
        assert!(d1.is_some() && d2.is_some());
        assert!(dead.try_acquire().is_none(), "the cap holds");
        let l1 = live.try_acquire();
        assert!(l1.is_some(), "the cap left the others a place");
        assert!(live.try_acquire().is_none(), "the shared budget is spent");
        assert_eq!(live.available(), 1, "a refused place took nothing");
        drop(d1);
        assert!(live.try_acquire().is_some());
    }
}
