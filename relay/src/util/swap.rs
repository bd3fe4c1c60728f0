//! A value read on every request and replaced whole by a reload (SIGHUP):
//! the tenants' keys, the admin token. A reader takes an `Arc` of the value
//! in force and keeps it for its request; a reload swaps in a new one.

use std::sync::{Arc, RwLock};

/// See the [module](self) docs.
#[derive(Debug, Default)]
pub(crate) struct Swap<T>(RwLock<Arc<T>>);

impl<T> Swap<T> {
    /// `value`, in force until [`set`](Self::set).
    pub(crate) fn new(value: T) -> Swap<T> {
        Swap(RwLock::new(Arc::new(value)))
    }

    /// The value in force.
    pub(crate) fn get(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `value` in force: readers from now on get it.
    pub(crate) fn set(&self, value: T) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_what_it_took() {
        let s = Swap::new(1);
        let taken = s.get();
        s.set(2);
        assert_eq!((*taken, *s.get()), (1, 2));
    }
}
