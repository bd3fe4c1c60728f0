//! The in-flight bound: how many deliveries may run at once, as a budget of
//! guards. A budget may be shared by several throttles (one bound across
//! destinations): clones share it. Each delivery holds an
//! [`InFlightPermit`] until it is accounted; dropping the permit frees the
//! place.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A budget of deliveries running at once, optionally inside a larger
/// budget shared with other throttles (a destination's cap inside the set's
/// budget): a place is taken in both or in neither.
#[derive(Clone)]
pub(crate) struct InFlight {
    sem: Arc<Semaphore>,
    parent: Option<Arc<Semaphore>>,
}

/// One delivery's place in the budget (and in the shared one), freed on drop.
pub(crate) struct InFlightPermit {
    _permit: OwnedSemaphorePermit,
    _shared: Option<OwnedSemaphorePermit>,
}

impl InFlight {
    /// A budget of `max` deliveries (at least 1).
    pub(crate) fn new(max: u32) -> Self {
        InFlight {
            sem: Arc::new(Semaphore::new(max.max(1) as usize)),
            parent: None,
        }
    }

    /// A budget of `max` of its own inside `shared`'s (a clone's) places.
    pub(crate) fn within(max: u32, shared: &InFlight) -> Self {
        InFlight {
            sem: Arc::new(Semaphore::new(max.max(1) as usize)),
            parent: Some(shared.sem.clone()),
        }
    }

    /// A place now, if one is free here and in the shared budget.
    pub(crate) fn try_acquire(&self) -> Option<InFlightPermit> {
        let own = self.sem.clone().try_acquire_owned().ok()?;
        let shared = match &self.parent {
            Some(parent) => Some(parent.clone().try_acquire_owned().ok()?),
            None => None,
        };
        Some(InFlightPermit {
            _permit: own,
            _shared: shared,
        })
    }

    /// Waits for a place here, then in the shared budget.
    pub(crate) async fn acquire(&self) -> Option<InFlightPermit> {
        let own = self.sem.clone().acquire_owned().await.ok()?;
        let shared = match &self.parent {
            Some(parent) => Some(parent.clone().acquire_owned().await.ok()?),
            None => None,
        };
        Some(InFlightPermit {
            _permit: own,
            _shared: shared,
        })
    }

    /// Places free in the budget (not counting the shared one).
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.sem.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn places_are_guards() {
        let budget = InFlight::new(2);
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
        let shared = InFlight::new(3);
        let dead = InFlight::within(2, &shared);
        let live = InFlight::within(2, &shared);
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
