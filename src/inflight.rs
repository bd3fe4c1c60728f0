//! The in-flight bound: how many deliveries may run at once, as a budget of
//! guards. A budget may be shared by several throttles (one bound across
//! destinations): clones share it. Each delivery holds an
//! [`InFlightPermit`] until it is accounted; dropping the permit frees the
//! place.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A budget of deliveries running at once.
#[derive(Clone)]
pub(crate) struct InFlight {
    sem: Arc<Semaphore>,
}

/// One delivery's place in the budget, freed on drop.
pub(crate) struct InFlightPermit {
    _permit: OwnedSemaphorePermit,
}

impl InFlight {
    /// A budget of `max` deliveries (at least 1).
    pub(crate) fn new(max: u32) -> Self {
        InFlight {
            sem: Arc::new(Semaphore::new(max.max(1) as usize)),
        }
    }

    /// A place now, if one is free.
    pub(crate) fn try_acquire(&self) -> Option<InFlightPermit> {
        self.sem
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|p| InFlightPermit { _permit: p })
    }

    /// Waits for a place.
    pub(crate) async fn acquire(&self) -> Option<InFlightPermit> {
        self.sem
            .clone()
            .acquire_owned()
            .await
            .ok()
            .map(|p| InFlightPermit { _permit: p })
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
}
