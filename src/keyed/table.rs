//! The bounded, sharded table of per-key reverse leaky buckets.

use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::bucket::{Admit, AdmitError, InvalidCost, Quota};
use super::clock::{self, TableClock};
use super::shard::{self, Ctx, Placed, Shard};

/// Largest share of keys one shard may hold (slot numbers are `u32`).
const MAX_SHARD_KEYS: usize = 1 << 31;

/// A table of reverse leaky buckets, one per key, holding at most
/// `max_keys` buckets whatever keys arrive.
///
/// Keys hash to one of a power-of-two number of shards (by default the
/// next power of two of 32 × available cores, fewer for small tables), each
/// behind its own mutex and holding its share of `max_keys`. Inserting a new key into a full shard
/// evicts a bucket already at zero debt, else the one that empties soonest.
/// A bucket is one word, when it empties (GCRA's theoretical arrival time,
/// an `f64` of nanoseconds since the table was built: 16 bytes a bucket
/// with a `u64` key), so there is no sweeper: debt drains lazily on
/// access. An admission's time is rounded up, never down, where the `f64`
/// cannot hold it (a nanosecond is its step at 104 days of a table's life),
/// and forgiven in the decision, at most 1/64 of the cost or of a unit:
/// bursts are exact (at 10^4 a second with whole costs, or 10^3 with costs
/// of 0.01, a year into a table's life; faster, a burst may be cut
/// short). Instants before the table was built count as its build
/// instant. Per-key quota overrides live in a separate, bounded map that is
/// never evicted: the caller sets and clears them.
///
/// Each shard's room is its own (`max_keys / shards`), not borrowed from
/// the others: with uneven hashing a shard can evict while the table as a
/// whole has room (100,000 live keys in room for exactly 100,000 evicted
/// 41,000 to 55,000 buckets still owing over a million checks). Borrowing
/// would put a shared count or a second shard's lock on every new key, the
/// hot path; instead give the table room above the keys you expect and,
/// where an evicted key must not come back with a fresh burst, a ledger
/// ([`remember_evicted`](KeyedBucketsBuilder::remember_evicted)), which
/// keeps what it owed whichever shard evicted it.
///
/// ```
/// use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota};
/// let table = KeyedBuckets::new(1000, Quota::per_second(1.0).burst(2.0)?)?;
/// assert!(table.try_admit(&"tenant-a", 2.0).is_ok());
/// assert!(matches!(table.try_admit(&"tenant-a", 1.0), Err(AdmitError::OverQuota(_))));
/// assert!(table.try_admit(&"tenant-b", 1.0).is_ok());
/// assert_eq!(table.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Keys are hashed by `S`, by default std's `RandomState` (SipHash-1-3,
/// keyed per table), as `HashMap` hashes them: an attacker who picks the
/// keys cannot pile them up. Where the keys are not chosen by an
/// adversary (or are hashes already), a faster hasher set with
/// [`KeyedBucketsBuilder::hasher`] (foldhash, or [`Prehashed`](super::Prehashed))
/// takes a quarter off a check's instructions; the benchmarks page
/// measures both.
pub struct KeyedBuckets<K, S = RandomState> {
    shards: Box<[Padded<Mutex<Shard<K>>>]>,
    shard_bits: u32,
    hasher: S,
    default_quota: Quota,
    clock: TableClock,
    max_keys: usize,
    max_overrides: usize,
    reserved: usize,
    len: AtomicUsize,
    overrides: AtomicUsize,
    evictions: AtomicU64,
}

/// Keeps each shard's lock on its own cache lines.
#[repr(align(128))]
struct Padded<T>(T);

/// Builds a [`KeyedBuckets`]; see [`KeyedBuckets::builder`].
///
/// ```
/// use dripfeed::keyed::{KeyedBuckets, Quota};
/// let table = KeyedBuckets::<u64>::builder(100, Quota::per_second(1.0).burst(1.0)?).shards(4).max_overrides(10).build()?;
/// assert_eq!((table.shards(), table.max_keys()), (4, 100));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedBucketsBuilder<K, S = RandomState> {
    key: PhantomData<fn() -> K>,
    hasher: S,
    max_keys: usize,
    default_quota: Quota,
    shards: Option<usize>,
    max_overrides: Option<usize>,
    remember_evicted: usize,
    clock: clock::Source,
}

impl<K, S> fmt::Debug for KeyedBucketsBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBucketsBuilder")
            .field("max_keys", &self.max_keys)
            .field("default_quota", &self.default_quota)
            .field("shards", &self.shards)
            .field("max_overrides", &self.max_overrides)
            .field("remember_evicted", &self.remember_evicted)
            .field("cycle_clock", &self.clock.is_cycles())
            .finish()
    }
}

impl<K: Hash + Eq + Clone, S: BuildHasher> KeyedBucketsBuilder<K, S> {
    /// Hashes keys with `hasher` instead of std's `RandomState`: for keys
    /// no adversary picks, a faster one (`foldhash`, `ahash`, or
    /// [`Prehashed`](super::Prehashed) for keys that are hashes already) takes a quarter off a check's
    /// instructions (see the benchmarks page).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// use std::hash::BuildHasherDefault;
    /// # #[derive(Default)] struct MyHasher(u64);
    /// # impl std::hash::Hasher for MyHasher {
    /// #     fn finish(&self) -> u64 { self.0 }
    /// #     fn write(&mut self, b: &[u8]) { for x in b { self.0 = self.0.rotate_left(8) ^ u64::from(*x); } }
    /// # }
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::<u64>::builder(10, q)
    ///     .hasher(BuildHasherDefault::<MyHasher>::default())
    ///     .build()?;
    /// assert!(t.try_admit(&7, 1.0).is_ok());
    /// assert!(t.try_admit(&7, 1.0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hasher<T: BuildHasher>(self, hasher: T) -> KeyedBucketsBuilder<K, T> {
        KeyedBucketsBuilder {
            key: PhantomData,
            hasher,
            max_keys: self.max_keys,
            default_quota: self.default_quota,
            shards: self.shards,
            max_overrides: self.max_overrides,
            remember_evicted: self.remember_evicted,
            clock: self.clock,
        }
    }

    /// Number of shards, rounded up to a power of two and capped so each
    /// shard holds at least one key. Default: next power of two of
    /// 32 × available cores, capped so each shard holds at least 128 keys.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::<u64>::builder(2, Quota::per_second(1.0).burst(1.0)?).shards(5).build()?;
    /// assert_eq!(t.shards(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Most keys that may have a quota override at once. Default: `max_keys`.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::builder(10, q).max_overrides(1).build()?;
    /// assert!(t.set_quota(1u8, q).is_ok());
    /// assert!(t.set_quota(2u8, q).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_overrides(mut self, max: usize) -> Self {
        self.max_overrides = Some(max);
        self
    }

    /// Keeps what evicted buckets still owed in a ledger of about `entries`
    /// 8-byte entries (split across the shards), so a key evicted while in
    /// debt comes back owing what it still would: a rotating set of keys
    /// larger than `max_keys` cannot walk through its quota by being
    /// evicted. A key is never let off (it owes at least its own debt, less
    /// what has drained since, at its rate now); it may owe more when both
    /// of its two entries were raised by keys that owed longer (size the
    /// ledger at a few times the keys that rotate; each shard gets at
    /// least 64 entries). Default 0: no ledger, an evicted key comes back
    /// with a fresh burst.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// # use tokio::time::Instant;
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::<u32>::builder(1, q).shards(1).remember_evicted(64).build()?;
    /// let now = Instant::now();
    /// assert!(t.try_admit_at(&1, 1.0, now).is_ok()); // key 1 owes a second
    /// assert!(t.try_admit_at(&2, 1.0, now).is_ok()); // and is evicted
    /// assert!(t.try_admit_at(&1, 1.0, now).is_err(), "its debt was kept");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remember_evicted(mut self, entries: usize) -> Self {
        self.remember_evicted = entries;
        self
    }

    /// Reads the time of the operations not given one (`try_admit`, …)
    /// from `clock`, the CPU's cycle counter through the quanta crate (as
    /// governor does), instead of tokio's clock. Feature `quanta`.
    ///
    /// Reading the system clock takes about half of a check's time on
    /// the benchmarks page's keyed workload: its `rdtscp` waits for the
    /// check's cache miss, where the cycle counter's `rdtsc` does not.
    /// The cost: this clock does not follow tokio's paused time (pass
    /// `quanta::Clock::mock()` to drive it in a test, or call the `_at`
    /// variants), and it is a timeline of its own: the gap between it and
    /// tokio's clock grows with the table's age (the calibration's error,
    /// and the system clock's NTP slewing, which the counter does not
    /// follow; at 100 ppm, seconds a day). Do not mix the `_at` variants
    /// with the others on a table built with it.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// use std::time::Duration;
    /// let (clock, time) = quanta::Clock::mock();
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::<u64>::builder(10, q).quanta_clock(clock).build()?;
    /// assert!(t.try_admit(&7, 1.0).is_ok());
    /// assert!(t.try_admit(&7, 1.0).is_err());
    /// time.increment(Duration::from_secs(1));
    /// assert!(t.try_admit(&7, 1.0).is_ok(), "a second on the counter drained it");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "quanta")]
    pub fn quanta_clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = clock::Source::cycles(clock);
        self
    }

    /// Validates the settings and reserves all of the table's memory.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota, TableError};
    /// let err = KeyedBuckets::<u64>::builder(0, Quota::per_second(1.0).burst(1.0)?).build().err();
    /// assert_eq!(err, Some(TableError::ZeroKeys));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<KeyedBuckets<K, S>, TableError> {
        if self.max_keys == 0 {
            return Err(TableError::ZeroKeys);
        }
        // By default: next power of two of 32 × cores (measured: 8 shards
        // left two threads contending at 1M keys), each holding at least
        // 128 keys so eviction stays close to table-wide.
        let (wanted, least) = match self.shards {
            Some(0) => return Err(TableError::ZeroShards),
            Some(n) => (n, 1),
            None => (
                32 * std::thread::available_parallelism().map_or(1, |n| n.get()),
                128,
            ),
        };
        // Largest power of two <= max_keys / least (at least 1).
        let room = (self.max_keys / least).max(1);
        let most = 1usize << (usize::BITS - 1 - room.leading_zeros());
        let count = wanted.min(most).min(1 << 16).next_power_of_two().min(most);
        if self.max_keys / count >= MAX_SHARD_KEYS {
            return Err(TableError::TooManyKeys(self.max_keys));
        }
        let mut shards = Vec::new();
        shards
            .try_reserve_exact(count)
            .map_err(|_| TableError::OutOfMemory)?;
        let mut reserved = 0;
        let ledger = match self.remember_evicted {
            0 => 0,
            n => n
                .div_ceil(count)
                .max(64)
                .checked_next_power_of_two()
                .ok_or(TableError::OutOfMemory)?,
        };
        // The whole table asked of the allocator once, and given back,
        // before any shard writes its memory: a size the system cannot give
        // is refused here, where shard after shard would each be granted
        // (the system overcommitting) and then fault the process out of
        // memory as they are written.
        let per_shard = shard::reserved_bytes::<K>(self.max_keys / count + 1, ledger);
        let whole = per_shard
            .checked_mul(count)
            .ok_or(TableError::OutOfMemory)?;
        Vec::<u8>::new()
            .try_reserve_exact(whole)
            .map_err(|_| TableError::OutOfMemory)?;
        for i in 0..count {
            let cap = self.max_keys / count + usize::from(i < self.max_keys % count);
            reserved += shard::reserved_bytes::<K>(cap, ledger);
            let shard = Shard::new(cap, ledger).ok_or(TableError::OutOfMemory)?;
            shards.push(Padded(Mutex::new(shard)));
        }
        Ok(KeyedBuckets {
            shards: shards.into_boxed_slice(),
            shard_bits: count.trailing_zeros(),
            hasher: self.hasher,
            default_quota: self.default_quota,
            clock: TableClock::new(self.clock),
            max_keys: self.max_keys,
            max_overrides: self.max_overrides.unwrap_or(self.max_keys),
            reserved,
            len: AtomicUsize::new(0),
            overrides: AtomicUsize::new(0),
            evictions: AtomicU64::new(0),
        })
    }
}

/// Why a [`KeyedBuckets`] could not be built.
///
/// ```
/// use dripfeed::keyed::TableError;
/// assert_eq!(TableError::ZeroKeys.to_string(), "max_keys must be at least 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableError {
    /// `max_keys` was zero.
    ZeroKeys,
    /// `shards(0)` was asked for.
    ZeroShards,
    /// `max_keys` gives a shard more than 2^31 keys.
    TooManyKeys(usize),
    /// The table's memory could not be reserved.
    OutOfMemory,
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroKeys => f.write_str("max_keys must be at least 1"),
            Self::ZeroShards => f.write_str("shard count must be at least 1"),
            Self::TooManyKeys(n) => write!(f, "max_keys {n} is too large for the shard count"),
            Self::OutOfMemory => f.write_str("cannot reserve memory for the table"),
        }
    }
}

impl std::error::Error for TableError {}

/// [`KeyedBuckets::set_quota`] was refused: the override map is full.
///
/// ```
/// use dripfeed::keyed::{KeyedBuckets, Quota};
/// let q = Quota::per_second(1.0).burst(1.0)?;
/// let t = KeyedBuckets::builder(10, q).max_overrides(0).build()?;
/// let err = t.set_quota("k", q).unwrap_err();
/// assert_eq!((err.max(), err.to_string().as_str()), (0, "too many quota overrides (max 0)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyOverrides {
    max: usize,
}

impl TooManyOverrides {
    /// The configured bound on overrides.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// # let q = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::builder(10, q).max_overrides(0).build()?;
    /// assert_eq!(t.set_quota(7u32, q).unwrap_err().max(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max(&self) -> usize {
        self.max
    }
}

impl fmt::Display for TooManyOverrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "too many quota overrides (max {})", self.max)
    }
}

impl std::error::Error for TooManyOverrides {}

impl<K: Hash + Eq + Clone> KeyedBuckets<K> {
    /// A table of at most `max_keys` buckets (at least 1) under
    /// `default_quota`, with default settings.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// assert_eq!((t.len(), t.max_keys()), (0, 10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(max_keys: usize, default_quota: Quota) -> Result<Self, TableError> {
        Self::builder(max_keys, default_quota).build()
    }

    /// A builder, to set the shard count or the override bound.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::<u32>::builder(8, Quota::per_second(1.0).burst(1.0)?).shards(1).build()?;
    /// assert_eq!(t.shards(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(max_keys: usize, default_quota: Quota) -> KeyedBucketsBuilder<K> {
        KeyedBucketsBuilder {
            key: PhantomData,
            hasher: RandomState::new(),
            max_keys,
            default_quota,
            shards: None,
            max_overrides: None,
            remember_evicted: 0,
            clock: clock::Source::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, S: BuildHasher> KeyedBuckets<K, S> {
    fn locate(&self, key: &K) -> (u64, MutexGuard<'_, Shard<K>>) {
        let hash = self.hasher.hash_one(key);
        let i = hash.checked_shr(64 - self.shard_bits).unwrap_or(0) as usize;
        // A panic in user `Eq`/`Hash` code (or a hasher `S`) before a write
        // leaves a shard as it was; one in a deletion's backward shift,
        // which hashes stored keys again, can leave a cluster unshifted
        // (keys past it then missed, as if evicted: never let past their
        // quota by more than an evicted key is). Either way the lock is
        // reused rather than failing every later call.
        let guard = self.shards[i]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (hash, guard)
    }

    /// The time of an operation in nanoseconds since the epoch: `at`, or
    /// the clock read now. Called with the shard's lock held, so that the
    /// times of a shard's operations that read the clock come in the order
    /// the operations do (two threads that read it before taking the lock
    /// could take it in the other order, and a bucket kept as when it
    /// empties would count the later one's time back as owed).
    fn clock(&self, at: Option<Instant>) -> u64 {
        match at {
            Some(at) => self.clock.at(at),
            None => self.clock.now(),
        }
    }

    /// What the shards' inserting operations need of the table.
    fn ctx(&self) -> Ctx<'_, S> {
        Ctx {
            default: &self.default_quota,
            hasher: &self.hasher,
        }
    }

    fn admit_when(&self, key: &K, cost: f64, at: Option<Instant>) -> Result<Admit, AdmitError> {
        let (hash, mut shard) = self.locate(key);
        let now = self.clock(at);
        let ctx = self.ctx();
        let (admit, placed) = shard.admit(hash, key, cost, now, &ctx)?;
        drop(shard);
        self.count(placed);
        Ok(admit)
    }

    fn check_when(&self, key: &K, cost: f64, at: Option<Instant>) -> Result<(), AdmitError> {
        let (hash, shard) = self.locate(key);
        let now = self.clock(at);
        shard
            .check(hash, key, cost, &self.default_quota, now)
            .map(|_| ())
    }

    fn debt_when(&self, key: &K, at: Option<Instant>) -> f64 {
        let (hash, shard) = self.locate(key);
        let now = self.clock(at);
        shard.debt(hash, key, &self.default_quota, now)
    }

    fn settle_when(
        &self,
        key: &K,
        costs: (f64, f64),
        at: Option<Instant>,
    ) -> Result<f64, InvalidCost> {
        let (hash, mut shard) = self.locate(key);
        let now = self.clock(at);
        let ctx = self.ctx();
        let (debt, placed) = shard.settle(hash, key, costs, now, &ctx)?;
        drop(shard);
        self.count(placed);
        Ok(debt)
    }

    fn set_quota_when(
        &self,
        key: K,
        quota: Quota,
        at: Option<Instant>,
    ) -> Result<(), TooManyOverrides> {
        let (hash, mut shard) = self.locate(&key);
        if !shard.overrides.contains_key(&key) {
            self.overrides
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < self.max_overrides).then_some(n + 1)
                })
                .map_err(|_| TooManyOverrides {
                    max: self.max_overrides,
                })?;
        }
        let now = self.clock(at);
        shard.set_quota(hash, key, Some(quota), now, &self.default_quota);
        Ok(())
    }

    fn clear_quota_when(&self, key: &K, at: Option<Instant>) -> bool {
        let (hash, mut shard) = self.locate(key);
        if !shard.overrides.contains_key(key) {
            return false;
        }
        let now = self.clock(at);
        shard.set_quota(hash, key.clone(), None, now, &self.default_quota);
        self.overrides.fetch_sub(1, Ordering::Relaxed);
        true
    }

    fn count(&self, placed: Placed) {
        match placed {
            Placed::Nothing => {}
            Placed::Added => {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            Placed::Evicted => {
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// [`try_admit_at`](Self::try_admit_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(3.0)?)?;
    /// assert_eq!(t.try_admit(&1, 2.0)?.remaining(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_admit(&self, key: &K, cost: f64) -> Result<Admit, AdmitError> {
        self.admit_when(key, cost, None)
    }

    /// Admits `cost` for `key` at `now` iff `debt_now + cost <= size`,
    /// adding it to the key's debt. A refusal changes nothing and says how
    /// long to wait; a cost above the key's size is
    /// [`AdmitError::CostExceedsSize`].
    ///
    /// Give a key's times in order: an instant before one the key was
    /// already admitted at counts the time between as owed (as GCRA does:
    /// the bucket is kept as when it empties). [`try_admit`](Self::try_admit)
    /// and the other variants without `_at` read the clock under the
    /// shard's lock, so their times are (tokio's clock; the cycle counter
    /// to within the counter's skew between cores, nanoseconds).
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, KeyedBuckets, Quota};
    /// # use std::time::Duration;
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(2.0)?)?;
    /// let now = tokio::time::Instant::now();
    /// t.try_admit_at(&"k", 2.0, now)?;
    /// let Err(AdmitError::OverQuota(o)) = t.try_admit_at(&"k", 1.0, now) else { panic!() };
    /// assert_eq!(o.retry_after(), Duration::from_secs(1));
    /// assert!(t.try_admit_at(&"k", 1.0, now + o.retry_after()).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_admit_at(&self, key: &K, cost: f64, now: Instant) -> Result<Admit, AdmitError> {
        self.admit_when(key, cost, Some(now))
    }

    /// [`can_admit_at`](Self::can_admit_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(2.0)?)?;
    /// assert!(t.can_admit(&'x', 2.0).is_ok());
    /// assert_eq!(t.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn can_admit(&self, key: &K, cost: f64) -> Result<(), AdmitError> {
        self.check_when(key, cost, None)
    }

    /// Whether [`try_admit_at`](Self::try_admit_at) would admit `cost` now,
    /// with the same errors; changes nothing.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(2.0)?)?;
    /// let now = tokio::time::Instant::now();
    /// t.try_admit_at(&'x', 1.5, now)?;
    /// assert!(t.can_admit_at(&'x', 1.0, now).is_err());
    /// assert_eq!(t.debt_at(&'x', now), 1.5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn can_admit_at(&self, key: &K, cost: f64, now: Instant) -> Result<(), AdmitError> {
        self.check_when(key, cost, Some(now))
    }

    /// [`debt_at`](Self::debt_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1e-9).burst(2.0)?)?;
    /// t.try_admit(&5, 2.0)?;
    /// assert!(t.debt(&5) > 1.99);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debt(&self, key: &K) -> f64 {
        self.debt_when(key, None)
    }

    /// The key's debt at `now`; 0 for a key with no bucket.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// # use std::time::Duration;
    /// let t = KeyedBuckets::new(10, Quota::per_second(2.0).burst(4.0)?)?;
    /// let now = tokio::time::Instant::now();
    /// t.try_admit_at(&5, 3.0, now)?;
    /// assert_eq!(t.debt_at(&5, now + Duration::from_millis(500)), 2.0);
    /// assert_eq!(t.debt_at(&6, now), 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debt_at(&self, key: &K, now: Instant) -> f64 {
        self.debt_when(key, Some(now))
    }

    /// [`settle_at`](Self::settle_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1e-9).burst(4.0)?)?;
    /// t.try_admit(&"job", 4.0)?;
    /// assert!(t.settle(&"job", 4.0, 1.0)? < 3.01);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, key: &K, estimated: f64, actual: f64) -> Result<f64, InvalidCost> {
        self.settle_when(key, (estimated, actual), None)
    }

    /// Corrects an admitted `estimated` cost to the `actual` one at `now`
    /// (both finite and non-negative): a refund, or extra debt that may take
    /// the key above its size so it waits longer. Debt never goes below zero.
    /// Returns the key's new debt.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(4.0)?)?;
    /// let now = tokio::time::Instant::now();
    /// t.try_admit_at(&"job", 2.0, now)?;
    /// assert_eq!(t.settle_at(&"job", 2.0, 7.0, now)?, 7.0);
    /// assert_eq!(t.settle_at(&"job", 10.0, 0.0, now)?, 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_at(
        &self,
        key: &K,
        estimated: f64,
        actual: f64,
        now: Instant,
    ) -> Result<f64, InvalidCost> {
        self.settle_when(key, (estimated, actual), Some(now))
    }

    /// [`set_quota_at`](Self::set_quota_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// t.set_quota("vip", Quota::per_second(10.0).burst(100.0)?)?;
    /// assert_eq!(t.quota(&"vip").size(), 100.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, key: K, quota: Quota) -> Result<(), TooManyOverrides> {
        self.set_quota_when(key, quota, None)
    }

    /// Gives `key` its own quota from `now` on: what its bucket owes at
    /// `now` (under the quota it had) is kept and drains at the new rate.
    /// (An evicted key the ledger remembers has no bucket: it owes until
    /// the time the ledger kept, at whatever rate it has.) Overrides are
    /// not evicted; at most `max_overrides` keys may have one.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// let now = tokio::time::Instant::now();
    /// t.set_quota_at("vip", Quota::per_second(1.0).burst(5.0)?, now)?;
    /// assert!(t.try_admit_at(&"vip", 5.0, now).is_ok());
    /// assert_eq!(t.overrides(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota_at(&self, key: K, quota: Quota, now: Instant) -> Result<(), TooManyOverrides> {
        self.set_quota_when(key, quota, Some(now))
    }

    /// [`clear_quota_at`](Self::clear_quota_at) at `Instant::now()` (on the
    /// table's clock: tokio's, or the cycle counter given to
    /// [`quanta_clock`](KeyedBucketsBuilder::quanta_clock)).
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// t.set_quota(3, Quota::per_second(1.0).burst(9.0)?)?;
    /// assert!(t.clear_quota(&3));
    /// assert_eq!(t.quota(&3), t.default_quota());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_quota(&self, key: &K) -> bool {
        self.clear_quota_when(key, None)
    }

    /// Returns `key` to the default quota from `now` on; `false` if it had
    /// no override.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::<u8>::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// assert!(!t.clear_quota_at(&3, tokio::time::Instant::now()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_quota_at(&self, key: &K, now: Instant) -> bool {
        self.clear_quota_when(key, Some(now))
    }

    /// The quota that applies to `key`: its override or the default.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let d = Quota::per_second(1.0).burst(1.0)?;
    /// let t = KeyedBuckets::new(10, d)?;
    /// assert_eq!(t.quota(&"anyone"), d);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self, key: &K) -> Quota {
        let (_, shard) = self.locate(key);
        shard.quota(key, &self.default_quota)
    }
}

impl<K, S> KeyedBuckets<K, S> {
    /// The quota of keys without an override.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let d = Quota::per_second(1.0).burst(3.0)?;
    /// assert_eq!(KeyedBuckets::<u8>::new(1, d)?.default_quota(), d);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn default_quota(&self) -> Quota {
        self.default_quota
    }

    /// Buckets stored now (for the `leaky_bucket_keyed_buckets` gauge); an
    /// atomic read. Drained buckets stay stored until evicted.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(2, Quota::per_second(1.0).burst(1.0)?)?;
    /// for k in 0..10 { t.try_admit(&k, 1.0)?; }
    /// assert_eq!(t.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no bucket is stored.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// assert!(KeyedBuckets::<u8>::new(2, Quota::per_second(1.0).burst(1.0)?)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound on stored buckets.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// assert_eq!(KeyedBuckets::<u8>::new(7, Quota::per_second(1.0).burst(1.0)?)?.max_keys(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Buckets evicted to make room so far (for
    /// `leaky_bucket_keyed_evictions_total`), drained ones included.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::new(1, Quota::per_second(1.0).burst(1.0)?)?;
    /// t.try_admit(&1, 1.0)?;
    /// t.try_admit(&2, 1.0)?;
    /// assert_eq!(t.evictions(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Keys with a quota override now.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// assert_eq!(KeyedBuckets::<u8>::new(1, Quota::per_second(1.0).burst(1.0)?)?.overrides(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn overrides(&self) -> usize {
        self.overrides.load(Ordering::Relaxed)
    }

    /// The number of shards.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// assert!(KeyedBuckets::<u8>::new(64, Quota::per_second(1.0).burst(1.0)?)?.shards().is_power_of_two());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Bytes the table reserved at build for its buckets, index and
    /// eviction heap; fixed for its lifetime. Heap data a key owns (a
    /// `String`'s text) and the override map come on top.
    ///
    /// ```
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// let t = KeyedBuckets::<u64>::new(1 << 20, Quota::per_second(1.0).burst(1.0)?)?;
    /// assert!(t.reserved_bytes() <= (1 << 20) * (8 + 64));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserved_bytes(&self) -> usize {
        self.reserved
    }
}

impl<K, S> fmt::Debug for KeyedBuckets<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuckets")
            .field("len", &self.len())
            .field("max_keys", &self.max_keys)
            .field("shards", &self.shards.len())
            .field("default_quota", &self.default_quota)
            .field("evictions", &self.evictions())
            .field("cycle_clock", &self.clock.is_cycles())
            .finish_non_exhaustive()
    }
}
