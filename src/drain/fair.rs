//! Fair delivery across keys: the order the drain emits queued jobs in.
//!
//! By default the drain emits first in, first out: one hot key's 10,000
//! queued jobs go out before a cold key's one job that came after them.
//! With [`DeliveryOrder::RoundRobinByKey`] the drain takes the jobs waiting
//! in the ring into one queue per key (the key a job was admitted for;
//! jobs without a key share one queue) and emits one job of each key with
//! jobs waiting in turn, so a job waits at most one round of the keys
//! active before it, whatever their backlog.
//!
//! Taking a job into its key's queue does not give its place back: it
//! counts against the queue's bound until it is emitted, as in the ring,
//! so the bound, `Retry-After` and the depth gauge stay what they were.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::admission::Entry;

/// The order the drain emits queued jobs in
/// ([`ThrottleBuilder::delivery_order`](crate::ThrottleBuilder::delivery_order)).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::keyed::Quota;
/// use dripfeed::{Delivery, DeliveryOrder, Submission, Throttle};
/// use std::sync::{Arc, Mutex};
///
/// let order = Arc::new(Mutex::new(Vec::new()));
/// let seen = order.clone();
/// let (throttle, drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .capacity(100)
///     .per_key(100, Quota::per_second(1_000.0).burst(1_000.0)?)
///     .delivery_order(DeliveryOrder::RoundRobinByKey)
///     .build(move |job: &String, _| {
///         seen.lock().unwrap().push(job.clone());
///         async { Delivery::Done }
///     })?;
/// throttle.pause();
/// for n in 0..3 {
///     throttle.try_submit(Submission::new(format!("hot {n}")).key("hot", 1.0))?;
/// }
/// throttle.try_submit(Submission::new("cold".to_string()).key("cold", 1.0))?;
/// throttle.resume();
/// throttle.shutdown(std::time::Duration::from_secs(1)).await;
/// drain.join().await;
/// // The cold key's job goes out second, not after the hot key's backlog.
/// assert_eq!(*order.lock().unwrap(), ["hot 0", "cold", "hot 1", "hot 2"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeliveryOrder {
    /// First in, first out across every key (the default, and the fastest).
    #[default]
    Fifo,
    /// One job of each key with jobs waiting in turn, first in, first out
    /// within a key. Needs keyed submissions (`per_key` or `key_store`);
    /// unkeyed jobs share one turn. Not with [`Overflow::HeadDrop`](crate::Overflow::HeadDrop):
    /// the jobs the drain has taken into its keys' queues are no longer
    /// in the ring that head-drop evicts from.
    RoundRobinByKey,
}

/// The keys are hashes already (with a per-throttle seed): used as they are.
#[derive(Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Emptied queues kept for reuse, at most (their allocations).
const SPARE: usize = 256;

/// The room an emptied queue keeps when it is kept for reuse: a hot key's
/// backlog does not stay allocated after it drains.
const SPARE_ROOM: usize = 16;

/// Queued jobs taken from the ring, one queue per key, and the keys' turn.
pub(crate) struct Fair<J> {
    queues: HashMap<u64, VecDeque<Entry<J>>, BuildHasherDefault<Hashed>>,
    /// Emptied queues, for keys that come back.
    spare: Vec<VecDeque<Entry<J>>>,
    /// Keys with jobs queued, in the order of their next turn.
    turn: VecDeque<u64>,
    len: usize,
}

impl<J> Fair<J> {
    pub(crate) fn new() -> Self {
        Fair {
            queues: HashMap::default(),
            spare: Vec::new(),
            turn: VecDeque::new(),
            len: 0,
        }
    }

    /// Queues `entry` behind its key's others; a key with none before
    /// takes its turn after every key waiting now.
    pub(crate) fn push(&mut self, entry: Entry<J>) {
        let key = entry.key;
        let spare = &mut self.spare;
        let queue = self
            .queues
            .entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        if queue.is_empty() {
            self.turn.push_back(key);
        }
        queue.push_back(entry);
        self.len += 1;
    }

    /// The next key's oldest job; the key goes to the back of the turn
    /// while it has more. A key left with none is forgotten (memory is
    /// what is queued, not every key ever seen, plus a few emptied queues).
    pub(crate) fn pop(&mut self) -> Option<Entry<J>> {
        let key = self.turn.pop_front()?;
        let queue = self.queues.get_mut(&key)?;
        let entry = queue.pop_front()?;
        if queue.is_empty() {
            if let Some(mut q) = self.queues.remove(&key)
                && self.spare.len() < SPARE
            {
                q.shrink_to(SPARE_ROOM);
                self.spare.push(q);
            }
        } else {
            self.turn.push_back(key);
        }
        self.len -= 1;
        Some(entry)
    }

    /// Every job queued here (at shutdown), oldest turn first.
    pub(crate) fn take_all(&mut self) -> Vec<Entry<J>> {
        let mut all = Vec::with_capacity(self.len);
        while let Some(e) = self.pop() {
            all.push(e);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u64, job: u32) -> Entry<u32> {
        Entry {
            job,
            id: u64::from(job),
            admitted_ns: 0,
            deadline_ns: u64::MAX,
            key,
            attempt: 1,
        }
    }

    #[test]
    fn a_cold_key_waits_one_round_behind_a_hot_backlog() {
        let mut fair = Fair::new();
        for n in 0..10_000 {
            fair.push(entry(2, n));
        }
        fair.push(entry(4, 10_000));
        fair.push(entry(6, 10_001));
        let first: Vec<u32> = (0..4).filter_map(|_| fair.pop().map(|e| e.job)).collect();
        assert_eq!(first, [0, 10_000, 10_001, 1]);
        assert_eq!(fair.len, 9_998);
        // The cold keys are forgotten once they have nothing queued.
        assert_eq!(fair.queues.len(), 1);
        assert_eq!(fair.take_all().len(), 9_998);
        assert!(fair.pop().is_none() && fair.queues.is_empty());
    }

    #[test]
    fn within_a_key_first_in_first_out() {
        let mut fair = Fair::new();
        for (key, job) in [(2, 1), (4, 2), (2, 3), (4, 4), (2, 5)] {
            fair.push(entry(key, job));
        }
        let order: Vec<u32> = std::iter::from_fn(|| fair.pop().map(|e| e.job)).collect();
        assert_eq!(order, [1, 2, 3, 4, 5]);
    }
}
