//! Jobs that ended with no record: an event's copy (its statuses are its
//! event's, not a webhook's) or a webhook that ended, with no attempt
//! (expired, evicted), before intake named it (one whose attempt started
//! has a record, from its delivery). Kept aside, briefly and in bounded
//! memory, for intake to own: a copy never becomes a webhook status (one
//! per copy filled the ended statuses, and their file, at every fan-out).

use std::collections::{HashMap, VecDeque};

use super::record::Rec;

/// How many are kept: far more than can end between a webhook's admission
/// and intake naming it.
pub(crate) const KEPT: usize = 4096;

/// See the [module](self) docs.
#[derive(Default)]
pub(crate) struct Unowned {
    by_id: HashMap<u64, (Rec, u64)>,
    order: VecDeque<u64>,
}

impl Unowned {
    /// Keeps job `id`'s end (`rec`, at `ended` ms), the oldest going first
    /// past [`KEPT`].
    pub(crate) fn insert(&mut self, id: u64, rec: Rec, ended: u64) {
        if self.by_id.insert(id, (rec, ended)).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > KEPT {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    /// Job `id`'s end, taken (intake names it now).
    pub(crate) fn take(&mut self, id: u64) -> Option<(Rec, u64)> {
        let found = self.by_id.remove(&id)?;
        self.order.retain(|&o| o != id);
        Some(found)
    }

    /// How many are kept.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_and_a_taken_one_is_gone() {
        let mut u = Unowned::default();
        for id in 0..(KEPT as u64 + 10) {
            u.insert(id, Rec::default(), id);
        }
        assert_eq!(u.len(), KEPT);
        assert!(u.take(5).is_none(), "among the oldest, gone");
        let (_, ended) = u.take(KEPT as u64 + 9).expect("the newest is kept");
        assert_eq!(ended, KEPT as u64 + 9);
        assert!(u.take(KEPT as u64 + 9).is_none(), "taken once");
        assert_eq!(u.len(), KEPT - 1);
    }
}
