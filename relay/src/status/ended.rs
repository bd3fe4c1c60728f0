//! Webhooks that ended (delivered or dead-lettered), remembered for
//! `status_retention` within `status_max` of them, oldest forgotten first.
//! Both bounds are enforced on every insert, and the retention on every
//! read, so what is held never outgrows `status_max` entries.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::record::Rec;

/// An ended webhook.
#[derive(Clone, Debug)]
pub(crate) struct Ended {
    /// Its status when it ended.
    pub rec: Rec,
    /// When it ended, ms since the Unix epoch.
    pub ended_unix_ms: u64,
}

/// The ended webhooks, by public id, in the order they ended.
pub(crate) struct EndedSet {
    by_id: HashMap<u64, Ended>,
    order: VecDeque<(u64, u64)>,
    retention: Duration,
    max: usize,
}

/// The bytes one remembered webhook takes, roughly: its entry in the map
/// and in the order (names are indexes into shared tables).
pub(crate) const ENTRY_BYTES: usize =
    std::mem::size_of::<(u64, Ended)>() + std::mem::size_of::<(u64, u64)>() + 16;

impl EndedSet {
    /// Remembers webhooks for `retention`, at most `max` of them.
    pub(crate) fn new(retention: Duration, max: usize) -> EndedSet {
        EndedSet {
            by_id: HashMap::new(),
            order: VecDeque::new(),
            retention,
            max,
        }
    }

    /// Webhooks remembered.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Remembers `status` as ended at `now` (ms since the epoch), forgetting
    /// the oldest past the bounds.
    pub(crate) fn insert(&mut self, id: u64, rec: Rec, now: u64) {
        if self.max == 0 {
            return;
        }
        self.forget_expired(now);
        if let Some(e) = self.by_id.get_mut(&id) {
            // Known already (its owner named late, or redriven and ended
            // again): one entry, forgotten by its last end.
            let again = e.ended_unix_ms != now;
            e.rec = rec;
            e.ended_unix_ms = now;
            if again {
                self.order.push_back((id, now));
            }
            return;
        }
        while self.by_id.len() >= self.max {
            if !self.pop_oldest() {
                break;
            }
        }
        let ended = Ended {
            rec,
            ended_unix_ms: now,
        };
        self.by_id.insert(id, ended);
        self.order.push_back((id, now));
    }

    /// The webhook `id` if it is still remembered at `now`.
    pub(crate) fn get(&mut self, id: u64, now: u64) -> Option<&Ended> {
        self.forget_expired(now);
        self.by_id.get(&id)
    }

    /// The webhook `id` if it is remembered, to fill in.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Ended> {
        self.by_id.get_mut(&id)
    }

    /// Forgets what ended longer than the retention before `now`.
    pub(crate) fn forget_expired(&mut self, now: u64) {
        let keep = u64::try_from(self.retention.as_millis()).unwrap_or(u64::MAX);
        while let Some(&(_, at)) = self.order.front() {
            if at.saturating_add(keep) > now {
                break;
            }
            self.pop_oldest();
        }
    }

    /// Forgets the oldest; `false` when nothing is left.
    fn pop_oldest(&mut self) -> bool {
        let Some((id, at)) = self.order.pop_front() else {
            return false;
        };
        // A webhook that ended twice (redriven under its id) is forgotten
        // by its last end only.
        if self.by_id.get(&id).is_some_and(|e| e.ended_unix_ms == at) {
            self.by_id.remove(&id);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::State;

    fn done() -> Rec {
        Rec {
            state: State::Delivered,
            ..Rec::default()
        }
    }

    #[test]
    fn the_oldest_is_forgotten_past_the_count() {
        let mut set = EndedSet::new(Duration::from_secs(60), 2);
        for id in 1..=3 {
            set.insert(id, done(), 1000 + id);
        }
        assert_eq!(set.len(), 2);
        assert!(set.get(1, 1004).is_none());
        assert!(set.get(3, 1004).is_some());
    }

    #[test]
    fn what_ended_before_the_retention_is_forgotten() {
        let mut set = EndedSet::new(Duration::from_secs(1), 10);
        set.insert(1, done(), 0);
        set.insert(2, done(), 500);
        assert!(set.get(1, 999).is_some());
        assert!(set.get(1, 1000).is_none());
        assert!(set.get(2, 1000).is_some());
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn the_same_end_twice_is_one_entry() {
        let mut set = EndedSet::new(Duration::from_secs(60), 2);
        set.insert(1, done(), 10);
        set.insert(1, done(), 10);
        set.insert(2, done(), 11);
        assert_eq!((set.len(), set.order.len()), (2, 2));
        assert!(set.get(1, 12).is_some(), "not evicted by its own repeat");
    }

    #[test]
    fn a_zero_bound_remembers_nothing() {
        let mut set = EndedSet::new(Duration::from_secs(1), 0);
        set.insert(1, done(), 0);
        assert_eq!(set.len(), 0);
    }
}
