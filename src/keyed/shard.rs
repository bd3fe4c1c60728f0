//! One shard of the keyed table: an open-addressing table of buckets
//! stored inline, a byte of hash tag per position, and a min-heap by
//! empty-at that picks the eviction victim exactly.
//!
//! Layout: `tags: Vec<u8>` (0 = empty, else `0x80 | 7 hash bits`) and
//! `slots: Vec<Option<Slot<K>>>` side by side, `P = cap + cap/3 + 1`
//! positions (load at most 3/4: at 6/7 a table that evicts on every check
//! took 1.7× as long, its clusters rehashed on each deletion), linear
//! probing from
//! `(low 32 hash bits × P) >> 32`, backward-shift deletion. A lookup scans
//! tag bytes (a small, cache-resident array) and touches one slot. A
//! [`Slot`] is `key` and one 8-byte word: when the bucket empties (an
//! `f64` of nanoseconds since the table's epoch, GCRA's theoretical
//! arrival time), so a `u64` key's slot takes 16 bytes. A bucket's debt at
//! `now` is `(until - now) × rate`; an admission moves `until` on by
//! `cost / rate`, rounded up when the `f64` cannot hold the sum (a key is
//! never charged short; the `f64`'s step is a nanosecond at 104 days of a
//! table's life, 4 at a year), and its decision forgives the rounding it
//! can have made ([`slack`]: at most 1/64 of the cost or of a unit), so bursts stay
//! exact. A per-key rate change keeps what the bucket owes at `now` and
//! drains it at the new rate from then on. Heap entries are 12 bytes.
//! Nothing is allocated after construction.
//!
//! The heap is only needed to evict, so it is built (in the room reserved
//! for it) at the shard's first eviction and kept from then on: until a
//! shard first fills, admissions never touch it, and a table with room for
//! every key never writes (so never makes resident) its heap's memory.
//!
//! The heap is repaired lazily: admissions only *raise* a bucket's empty-at,
//! so they leave its heap entry as a lower bound and never touch the heap.
//! Invariant, once the heap is kept: every occupied position has a heap
//! entry naming it whose time is <= its bucket's current empty-at (a
//! mutation that lowers it, a new bucket, and a bucket moved by deletion
//! each push a fresh entry). Eviction
//! looks at the minimum: an entry for an empty position is dropped, a stale
//! one is rewritten with the current time and sifted down, and an entry that
//! matches is the exact minimum over all buckets.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroU64;

use super::bucket::{
    Admit, AdmitError, InvalidCost, NANOS_PER_SEC, OverQuota, Quota, check_cost, check_settle,
    decide, decide_within, settle_debt,
};

/// One stored bucket: its key and when it empties.
pub(crate) struct Slot<K> {
    key: K,
    /// The bits of `until` (finite, `>= 0`), plus one, so `Option<Slot>`
    /// costs nothing extra.
    until: NonZeroU64,
}

impl<K> Slot<K> {
    fn new(key: K, until: f64) -> Self {
        Self {
            key,
            until: Self::encode(until),
        }
    }
    fn encode(until: f64) -> NonZeroU64 {
        // NaN and negatives are 0; +inf is f64::MAX, so `+ 1` cannot overflow.
        let until = if until > 0.0 {
            until.min(f64::MAX)
        } else {
            0.0
        };
        NonZeroU64::new(until.to_bits() + 1).unwrap_or(NonZeroU64::MAX)
    }
    /// Nanoseconds since the epoch at which the bucket is empty.
    fn until(&self) -> f64 {
        f64::from_bits(self.until.get() - 1)
    }
}

/// `base + span`, rounded up so the sum is never short of it.
fn add_up(base: f64, span: f64) -> f64 {
    let sum = base + span;
    if sum - base < span {
        sum.next_up()
    } else {
        sum
    }
}

/// The nanoseconds `debt` takes to drain at `rate` (multiplied first, so
/// whole numbers stay whole, unless that overflows).
fn span(debt: f64, rate: f64) -> f64 {
    let span = debt * NANOS_PER_SEC / rate;
    if span.is_finite() {
        span
    } else {
        debt / rate * NANOS_PER_SEC
    }
}

/// When a bucket owing `debt` at `now` empties at `rate`.
fn until_of(debt: f64, now: u64, rate: f64) -> f64 {
    if debt > 0.0 {
        add_up(now as f64, span(debt, rate))
    } else {
        now as f64
    }
}

/// What a bucket that empties at `until` owes at `now` at `rate`. One kept
/// at the largest `f64` (its time to empty was past what one holds: a
/// debt of `f64::MAX`, or a rate so small that a cost takes longer than
/// that) owes `f64::MAX` for good.
fn debt_at(until: f64, now: u64, rate: f64) -> f64 {
    if until >= f64::MAX {
        return f64::MAX;
    }
    let ahead = until - now as f64;
    if ahead <= 0.0 {
        return 0.0;
    }
    let debt = ahead * rate / NANOS_PER_SEC;
    if debt.is_finite() {
        debt
    } else {
        (ahead / NANOS_PER_SEC * rate).min(f64::MAX)
    }
}

/// The units past its size an admission of `cost` that leaves a bucket
/// emptying at `after` may reach, since the `f64` cannot tell them from
/// rounding: one of its steps at `after` for each admission that can have
/// rounded up since the bucket was last empty (`size / cost`, plus 64), at
/// most 1/64 of the cost or of one unit, whichever is more (where the
/// steps are worth more, a burst may be cut short instead: a step is a
/// nanosecond at 104 days of a table's life, 4 at a year, so at 10^4 a
/// second with whole costs or 10^3 with costs of 0.01 a year in), plus
/// 2^-40 of the size for the conversions between time and debt.
fn slack(after: f64, cost: f64, quota: &Quota) -> f64 {
    let steps = if after.is_finite() {
        let step = (after.next_up() - after) * quota.rate() / NANOS_PER_SEC;
        (quota.size() / cost + 64.0) * step
    } else {
        0.0
    };
    steps.min(cost.max(1.0) / 64.0) + quota.size() * 2f64.powi(-40)
}

/// `(empty_at, position)` in three `u32`s so an entry takes 12 bytes; the
/// derived order is that of `(empty_at as u64, position)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    hi: u32,
    lo: u32,
    pos: u32,
}

impl Entry {
    fn new(at: u64, pos: usize) -> Reverse<Self> {
        Reverse(Self {
            hi: (at >> 32) as u32,
            lo: at as u32,
            pos: pos as u32,
        })
    }
    fn at(&self) -> u64 {
        (u64::from(self.hi) << 32) | u64::from(self.lo)
    }
}

/// What an operation did to the shard's population.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    /// No new bucket was stored.
    Nothing,
    /// A new bucket took a free position.
    Added,
    /// A new bucket replaced the soonest-empty one.
    Evicted,
}

/// What shard operations that may insert need from the table.
pub(crate) struct Ctx<'a, S> {
    pub(crate) default: &'a Quota,
    pub(crate) hasher: &'a S,
}

pub(crate) struct Shard<K> {
    tags: Vec<u8>,
    slots: Vec<Option<Slot<K>>>,
    len: usize,
    cap: usize,
    heap: BinaryHeap<Reverse<Entry>>,
    heap_limit: usize,
    /// The heap is kept (see the module's notes): set at the first eviction.
    tracked: bool,
    pub(crate) overrides: HashMap<K, Quota>,
    /// When evicted buckets that still owed finish paying (nanos since the
    /// epoch), by two hash-chosen entries each (a power of two long; empty:
    /// no ledger). A key with no bucket owes until the earlier of its two
    /// entries: never less than it owed when evicted (less what has
    /// drained since, at its rate now); more when both entries were raised
    /// by other keys, or by its own earlier eviction.
    ledger: Box<[u64]>,
}

/// The bytes a shard of `cap` buckets with a ledger of `ledger` entries
/// reserves (excluding key-owned heap data and overrides).
pub(crate) fn reserved_bytes<K>(cap: usize, ledger: usize) -> usize {
    let (positions, heap_limit) = sizes(cap);
    (positions * (size_of::<Option<Slot<K>>>() + 1))
        .saturating_add(heap_limit * size_of::<Entry>())
        .saturating_add(ledger.saturating_mul(size_of::<u64>()))
}

/// The two ledger entries of `hash` in a ledger of `len` (a power of two).
fn ledger_at(hash: u64, len: usize) -> (usize, usize) {
    let mask = len as u64 - 1;
    let a = hash & mask;
    let b = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) & mask;
    (a as usize, b as usize)
}

fn sizes(cap: usize) -> (usize, usize) {
    (cap + cap / 3 + 1, cap + cap / 4 + 16)
}

fn tag(hash: u64) -> u8 {
    0x80 | ((hash >> 32) as u8 & 0x7f)
}

fn quota_in<K: Hash + Eq>(overrides: &HashMap<K, Quota>, key: &K, default: &Quota) -> Quota {
    if overrides.is_empty() {
        *default
    } else {
        overrides.get(key).copied().unwrap_or(*default)
    }
}

/// The whole nanosecond at which `slot` empties (rounded up, saturating).
fn empty_at<K>(slot: &Slot<K>) -> u64 {
    // `as` saturates.
    slot.until().ceil() as u64
}

fn drained<K>(slot: &Slot<K>, quota: &Quota, now: u64) -> f64 {
    debt_at(slot.until(), now, quota.rate())
}

/// The admission of `cost` at `now` to the stored bucket `slot`, and when
/// the bucket would empty after it: the time past `now` it already owed,
/// then the cost's.
fn admitted<K>(
    slot: &Slot<K>,
    cost: f64,
    quota: &Quota,
    now: u64,
) -> Result<(Admit, f64), OverQuota> {
    let after = add_up(slot.until().max(now as f64), span(cost, quota.rate()));
    let debt = drained(slot, quota, now);
    // The slack only matters to a cost that would not fit without it.
    let admit = if debt + cost <= quota.size() {
        decide(debt, cost, quota)?
    } else {
        decide_within(debt, cost, quota, slack(after, cost, quota))?
    };
    Ok((admit, after))
}

impl<K: Hash + Eq + Clone> Shard<K> {
    /// A shard for at most `cap` buckets (`1 <= cap < 2^31`), or `None` if
    /// the memory cannot be reserved.
    pub(crate) fn new(cap: usize, ledger: usize) -> Option<Self> {
        let (positions, heap_limit) = sizes(cap);
        let mut owed = Vec::new();
        owed.try_reserve_exact(ledger).ok()?;
        owed.resize(ledger, 0);
        let mut tags = Vec::new();
        tags.try_reserve_exact(positions).ok()?;
        tags.resize(positions, 0);
        let mut slots = Vec::new();
        slots.try_reserve_exact(positions).ok()?;
        slots.resize_with(positions, || None);
        let mut heap = Vec::new();
        heap.try_reserve_exact(heap_limit).ok()?;
        Some(Self {
            tags,
            slots,
            len: 0,
            cap,
            heap: BinaryHeap::from(heap),
            heap_limit,
            tracked: false,
            overrides: HashMap::new(),
            ledger: owed.into_boxed_slice(),
        })
    }

    /// What a key of `hash` with no bucket owes at `now`: what the ledger
    /// says an evicted one still owed (0 without a ledger).
    fn owed(&self, hash: u64, quota: &Quota, now: u64) -> f64 {
        if self.ledger.is_empty() {
            return 0.0;
        }
        let (a, b) = ledger_at(hash, self.ledger.len());
        debt_at(self.ledger[a].min(self.ledger[b]) as f64, now, quota.rate())
    }

    /// Writes down that the bucket of `hash`, evicted, owes until `until`.
    fn remember(&mut self, hash: u64, until: u64) {
        if self.ledger.is_empty() {
            return;
        }
        let (a, b) = ledger_at(hash, self.ledger.len());
        self.ledger[a] = self.ledger[a].max(until);
        self.ledger[b] = self.ledger[b].max(until);
    }

    pub(crate) fn quota(&self, key: &K, default: &Quota) -> Quota {
        quota_in(&self.overrides, key, default)
    }

    fn home(&self, hash: u64) -> usize {
        (((hash & 0xffff_ffff) * self.tags.len() as u64) >> 32) as usize
    }

    fn next(&self, pos: usize) -> usize {
        if pos + 1 == self.tags.len() {
            0
        } else {
            pos + 1
        }
    }

    /// `Ok(position)` if `key` is stored, else `Err(free position)`.
    fn find(&self, hash: u64, key: &K) -> Result<usize, usize> {
        let tag = tag(hash);
        let mut pos = self.home(hash);
        loop {
            // Load < 1 always leaves an empty position, so this ends.
            match self.tags[pos] {
                0 => return Err(pos),
                t if t == tag => {
                    if let Some(slot) = &self.slots[pos]
                        && slot.key == *key
                    {
                        return Ok(pos);
                    }
                }
                _ => {}
            }
            pos = self.next(pos);
        }
    }

    fn slot(&self, pos: usize) -> Option<&Slot<K>> {
        self.slots.get(pos).and_then(Option::as_ref)
    }

    /// Sets when the bucket at `pos` empties, keeping the heap invariant.
    fn write(&mut self, pos: usize, until: f64) {
        let Some(slot) = self.slots.get_mut(pos).and_then(Option::as_mut) else {
            return;
        };
        if !self.tracked {
            slot.until = Slot::<K>::encode(until);
            return;
        }
        let old = empty_at(slot);
        slot.until = Slot::<K>::encode(until);
        let new = empty_at(slot);
        if new < old {
            self.push(new, pos);
        }
    }

    fn push(&mut self, at: u64, pos: usize) {
        if !self.tracked {
            // Built whole at the first eviction.
        } else if self.heap.len() >= self.heap_limit {
            self.rebuild(); // includes `pos` as it is now
        } else {
            self.heap.push(Entry::new(at, pos));
        }
    }

    /// One fresh entry per bucket, in place: O(positions).
    fn rebuild(&mut self) {
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.clear();
        entries.extend(
            self.slots
                .iter()
                .enumerate()
                .filter_map(|(pos, slot)| slot.as_ref().map(|s| Entry::new(empty_at(s), pos))),
        );
        self.heap = BinaryHeap::from(entries);
    }

    /// The position of the bucket that empties soonest (zero-debt ones
    /// first), its entry popped.
    fn victim(&mut self) -> Option<usize> {
        if !self.tracked {
            self.tracked = true;
            self.rebuild();
        }
        let mut repairs = 0;
        loop {
            let Self { heap, slots, .. } = self;
            let Some(mut top) = heap.peek_mut() else {
                self.rebuild();
                if self.heap.is_empty() {
                    return None;
                }
                continue;
            };
            let pos = top.0.pos as usize;
            let Some(slot) = slots.get(pos).and_then(Option::as_ref) else {
                PeekMut::pop(top);
                continue;
            };
            let current = empty_at(slot);
            if top.0.at() == current {
                PeekMut::pop(top);
                return Some(pos);
            }
            repairs += 1;
            if repairs > 16 + self.cap / 16 {
                drop(top);
                self.rebuild();
                repairs = 0;
                continue;
            }
            *top = Entry::new(current, pos);
        }
    }

    /// Empties `pos` by backward-shift deletion; each bucket moved gets a
    /// heap entry at its new position.
    fn remove(&mut self, pos: usize, hasher: &impl BuildHasher) {
        let mut hole = pos;
        let mut next = self.next(pos);
        let n = self.tags.len();
        while self.tags[next] != 0 {
            let home = match &self.slots[next] {
                Some(slot) => self.home(hasher.hash_one(&slot.key)),
                None => next,
            };
            // Move the bucket at `next` into the hole unless its home lies
            // cyclically in (hole, next].
            if (next + n - home) % n >= (next + n - hole) % n {
                self.tags[hole] = self.tags[next];
                self.slots[hole] = self.slots[next].take();
                if let Some(slot) = &self.slots[hole] {
                    let at = empty_at(slot);
                    self.push(at, hole);
                }
                hole = next;
            }
            next = self.next(next);
        }
        self.tags[hole] = 0;
        self.slots[hole] = None;
    }

    /// Stores a new bucket for `key` (known absent) that empties at
    /// `until`, evicting if full.
    fn insert(
        &mut self,
        hash: u64,
        key: &K,
        until: f64,
        now: u64,
        ctx: &Ctx<'_, impl BuildHasher>,
    ) -> Placed {
        let slot = Slot::new(key.clone(), until);
        let placed = if self.len < self.cap {
            self.len += 1;
            Placed::Added
        } else {
            match self.victim() {
                Some(pos) => {
                    // Its debt outlives it in the ledger (if there is one).
                    if !self.ledger.is_empty()
                        && let Some(victim) = self.slot(pos)
                    {
                        let until = empty_at(victim);
                        if until > now {
                            let h = ctx.hasher.hash_one(&victim.key);
                            self.remember(h, until);
                        }
                    }
                    self.remove(pos, ctx.hasher);
                }
                None => return Placed::Nothing, // unreachable: a full shard has entries
            }
            Placed::Evicted
        };
        let mut pos = self.home(hash);
        while self.tags[pos] != 0 {
            pos = self.next(pos);
        }
        let at = empty_at(&slot);
        self.tags[pos] = tag(hash);
        self.slots[pos] = Some(slot);
        self.push(at, pos);
        placed
    }

    pub(crate) fn debt(&self, hash: u64, key: &K, default: &Quota, now: u64) -> f64 {
        let quota = self.quota(key, default);
        match self.find(hash, key).ok().and_then(|pos| self.slot(pos)) {
            Some(slot) => drained(slot, &quota, now),
            None => self.owed(hash, &quota, now),
        }
    }

    pub(crate) fn check(
        &self,
        hash: u64,
        key: &K,
        cost: f64,
        default: &Quota,
        now: u64,
    ) -> Result<Admit, AdmitError> {
        let quota = self.quota(key, default);
        check_cost(cost, &quota)?;
        match self.find(hash, key).ok().and_then(|pos| self.slot(pos)) {
            Some(slot) => Ok(admitted(slot, cost, &quota, now)?.0),
            None => Ok(decide(self.owed(hash, &quota, now), cost, &quota)?),
        }
    }

    #[inline]
    pub(crate) fn admit(
        &mut self,
        hash: u64,
        key: &K,
        cost: f64,
        now: u64,
        ctx: &Ctx<'_, impl BuildHasher>,
    ) -> Result<(Admit, Placed), AdmitError> {
        let quota = self.quota(key, ctx.default);
        check_cost(cost, &quota)?;
        match self
            .find(hash, key)
            .ok()
            .and_then(|pos| Some((pos, self.slot(pos)?)))
        {
            Some((pos, slot)) => {
                let (admit, after) = admitted(slot, cost, &quota, now)?;
                self.write(pos, after);
                Ok((admit, Placed::Nothing))
            }
            None => {
                let admit = decide(self.owed(hash, &quota, now), cost, &quota)?;
                let until = until_of(admit.debt(), now, quota.rate());
                Ok((admit, self.insert(hash, key, until, now, ctx)))
            }
        }
    }

    pub(crate) fn settle(
        &mut self,
        hash: u64,
        key: &K,
        (estimated, actual): (f64, f64),
        now: u64,
        ctx: &Ctx<'_, impl BuildHasher>,
    ) -> Result<(f64, Placed), InvalidCost> {
        check_settle(estimated, actual)?;
        let quota = self.quota(key, ctx.default);
        match self
            .find(hash, key)
            .ok()
            .and_then(|pos| Some((pos, self.slot(pos)?)))
        {
            Some((pos, slot)) => {
                let debt = settle_debt(drained(slot, &quota, now), estimated, actual);
                self.write(pos, until_of(debt, now, quota.rate()));
                Ok((debt, Placed::Nothing))
            }
            None => {
                let debt = settle_debt(self.owed(hash, &quota, now), estimated, actual);
                let placed = if debt > 0.0 {
                    let until = until_of(debt, now, quota.rate());
                    self.insert(hash, key, until, now, ctx)
                } else {
                    Placed::Nothing
                };
                Ok((debt, placed))
            }
        }
    }

    /// Sets (`Some`) or clears (`None`) `key`'s override. A stored bucket
    /// keeps what it owes at `now` under the old rate and drains it at the
    /// new rate from `now` on. Returns the previous override.
    pub(crate) fn set_quota(
        &mut self,
        hash: u64,
        key: K,
        quota: Option<Quota>,
        now: u64,
        default: &Quota,
    ) -> Option<Quota> {
        let found = self.find(hash, &key).ok();
        let owed = found
            .and_then(|pos| self.slot(pos))
            .map(|slot| drained(slot, &self.quota(&key, default), now));
        let new_rate = quota.unwrap_or(*default).rate();
        let previous = match quota {
            Some(q) => self.overrides.insert(key, q),
            None => self.overrides.remove(&key),
        };
        if let (Some(pos), Some(debt)) = (found, owed) {
            self.write(pos, until_of(debt, now, new_rate));
        }
        previous
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hash::RandomState;

    #[derive(Debug, Clone)]
    enum Op {
        Admit(u8, f64),
        Settle(u8, f64, f64),
        SetRate(u8, Option<f64>),
        Advance(u64),
        Victim,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12, 0.1f64..4.0).prop_map(|(k, c)| Op::Admit(k, c)),
            2 => (0u8..12, 0.0f64..4.0, 0.0f64..6.0).prop_map(|(k, e, a)| Op::Settle(k, e, a)),
            1 => (0u8..12, proptest::option::of(0.5f64..8.0)).prop_map(|(k, r)| Op::SetRate(k, r)),
            2 => (0u64..2_000_000_000).prop_map(Op::Advance),
            1 => Just(Op::Victim),
        ]
    }

    impl<K: Hash + Eq + Clone> Shard<K> {
        /// Tags match slots, every bucket is found, the heap bounds each.
        fn assert_consistent(&self, hasher: &RandomState) {
            let stored: Vec<(usize, &Slot<K>)> = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(p, s)| s.as_ref().map(|s| (p, s)))
                .collect();
            assert_eq!(self.tags.iter().filter(|t| **t != 0).count(), stored.len());
            assert!(
                stored.len() == self.len
                    && self.len <= self.cap
                    && self.heap.len() <= self.heap_limit
            );
            for (pos, slot) in stored {
                assert_eq!(self.tags[pos], tag(hasher.hash_one(&slot.key)));
                assert_eq!(self.find(hasher.hash_one(&slot.key), &slot.key), Ok(pos));
                let at = empty_at(slot);
                assert!(
                    !self.tracked
                        || self
                            .heap
                            .iter()
                            .any(|e| e.0.pos as usize == pos && e.0.at() <= at)
                );
            }
        }
    }

    #[test]
    fn a_bucket_is_never_charged_short() {
        // A year in: the f64's step is 4 ns, so a 0.1 ns cost alone would
        // vanish in the sum; rounded up, every admission still counts.
        let year = 365 * 24 * 3600 * 1_000_000_000u64;
        let hasher = RandomState::new();
        let default = Quota::per_second(1e10).burst(1e4).unwrap();
        let ctx = Ctx {
            default: &default,
            hasher: &hasher,
        };
        let mut shard = Shard::<u8>::new(4, 0).unwrap();
        let admitted = (0..100_000)
            .take_while(|_| {
                shard
                    .admit(hasher.hash_one(1u8), &1, 1.0, year, &ctx)
                    .is_ok()
            })
            .count();
        assert!((1..=10_000).contains(&admitted), "{admitted}");
        for (base, span) in [(1e16, 0.1), (3e16, 5.0), (0.0, 1e-300), (1.0, 0.3)] {
            assert!(add_up(base, span) - base >= span);
        }
        assert_eq!(until_of(0.0, 7, 1.0), 7.0);
        assert_eq!(debt_at(f64::MAX, 0, f64::MAX), f64::MAX);
        // Past what an f64 of time holds: owed for good, not wrapped.
        assert_eq!(debt_at(f64::MAX, 0, 1e-300), f64::MAX);
        assert_eq!(span(1e300, 1e300), 1e9);
        let tiny = Quota::per_second(1e-300).burst(10.0).unwrap();
        let huge = Quota::per_second(1e300).burst(1e300).unwrap();
        let (slow, fast) = (
            Ctx {
                default: &tiny,
                hasher: &hasher,
            },
            Ctx {
                default: &huge,
                hasher: &hasher,
            },
        );
        let mut shard = Shard::<u8>::new(4, 0).unwrap();
        let h = hasher.hash_one(2u8);
        assert!(shard.admit(h, &2, 1.0, 0, &slow).is_ok());
        assert!(
            shard.admit(h, &2, 1.0, 0, &slow).is_err(),
            "a rate of 1e-300 holds"
        );
        let h = hasher.hash_one(3u8);
        assert!(shard.admit(h, &3, 1e300, 0, &fast).is_ok());
        let second = 1_000_000_000;
        assert!(
            shard.admit(h, &3, 1e300, second, &fast).is_ok(),
            "drained in a second"
        );
        assert_eq!(Slot::new(0u8, f64::INFINITY).until(), f64::MAX);
        assert_eq!(Slot::new(0u8, f64::NAN).until(), 0.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn index_heap_and_victims_stay_exact(ops in proptest::collection::vec(op(), 1..200)) {
            let hasher = RandomState::new();
            let default = Quota::per_second(1.0).burst(5.0).unwrap();
            let ctx = Ctx { default: &default, hasher: &hasher };
            let mut shard = Shard::<u8>::new(5, 0).unwrap();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Admit(k, c) => { let _ = shard.admit(hasher.hash_one(k), &k, c, now, &ctx); }
                    Op::Settle(k, e, a) => { let _ = shard.settle(hasher.hash_one(k), &k, (e, a), now, &ctx); }
                    Op::SetRate(k, r) => {
                        let q = r.map(|r| Quota::per_second(r).burst(5.0).unwrap());
                        shard.set_quota(hasher.hash_one(k), k, q, now, &default);
                    }
                    Op::Advance(d) => now += d,
                    Op::Victim if shard.len > 0 => {
                        let min = shard.slots.iter().flatten().map(empty_at).min();
                        let pos = shard.victim().unwrap();
                        let got = empty_at(shard.slot(pos).unwrap());
                        prop_assert_eq!(Some(got), min);
                        shard.push(got, pos);
                    }
                    Op::Victim => {}
                }
                shard.assert_consistent(&hasher);
            }
        }
    }
}
