//! Pure maths of one reverse leaky bucket: debt, drain, admission, waits.
//!
//! A bucket holds *debt*. Admitting a cost `c` adds `c`; debt drains at the
//! quota's rate; `debt_now = max(0, debt - (now - last) × rate)`; a cost is
//! admitted iff `debt_now + c <= size`. Nothing here reads a clock: every
//! function takes `now`.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

pub(crate) const NANOS_PER_SEC: f64 = 1e9;

/// A bucket's drain rate (debt units per second: the sustained rate) and
/// size (the burst: the most debt an admission may leave), built with
/// named steps: `Quota::per_second(rate).burst(size)`.
///
/// ```
/// use dripfeed::keyed::Quota;
/// let q = Quota::per_second(2.0).burst(10.0)?; // 2/s sustained, bursts of 10
/// assert_eq!((q.rate(), q.size()), (2.0, 10.0));
/// assert!(Quota::per_second(f64::NAN).burst(1.0).is_err());
/// # Ok::<(), dripfeed::keyed::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    size: f64,
    rate: f64,
}

/// A quota's rate, waiting for its burst: from [`Quota::per_second`] or
/// [`Quota::per_minute`]; finish with [`burst`](Self::burst).
///
/// ```
/// use dripfeed::keyed::{Quota, QuotaBuilder};
/// let sixty_a_minute: QuotaBuilder = Quota::per_minute(60.0);
/// assert_eq!(sixty_a_minute.burst(5.0)?, Quota::per_second(1.0).burst(5.0)?);
/// # Ok::<(), dripfeed::keyed::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "give the quota its burst: Quota::per_second(rate).burst(size)"]
pub struct QuotaBuilder {
    rate: f64,
}

impl QuotaBuilder {
    /// The burst: the most cost admitted at once from an empty bucket (the
    /// bucket's size). It must be finite, positive, and at least every cost
    /// you admit.
    ///
    /// ```
    /// use dripfeed::keyed::{Quota, QuotaError};
    /// assert_eq!(Quota::per_second(1.0).burst(0.0), Err(QuotaError::InvalidSize(0.0)));
    /// ```
    pub fn burst(self, size: f64) -> Result<Quota, QuotaError> {
        Quota::checked(size, self.rate)
    }
}

impl Quota {
    /// A quota sustaining `rate` units per second; give its burst next.
    ///
    /// ```
    /// use dripfeed::keyed::{Quota, QuotaError};
    /// let q = Quota::per_second(20.0).burst(50.0)?;
    /// assert_eq!(q.drain_time(), std::time::Duration::from_millis(2500));
    /// assert_eq!(Quota::per_second(-1.0).burst(1.0), Err(QuotaError::InvalidRate(-1.0)));
    /// # Ok::<(), QuotaError>(())
    /// ```
    pub fn per_second(rate: f64) -> QuotaBuilder {
        QuotaBuilder { rate }
    }

    /// A quota sustaining `units` per minute; give its burst next.
    ///
    /// ```
    /// use dripfeed::keyed::Quota;
    /// let q = Quota::per_minute(120.0).burst(10.0)?;
    /// assert_eq!(q.rate(), 2.0);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn per_minute(units: f64) -> QuotaBuilder {
        QuotaBuilder { rate: units / 60.0 }
    }

    /// A quota sustaining `units` per hour; give its burst next (the
    /// bucket law: at most `burst + units` in any hour).
    ///
    /// ```
    /// use dripfeed::keyed::Quota;
    /// let q = Quota::per_hour(7_200.0).burst(100.0)?;
    /// assert_eq!(q.rate(), 2.0);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn per_hour(units: f64) -> QuotaBuilder {
        QuotaBuilder {
            rate: units / 3600.0,
        }
    }

    /// A quota of `size` debt units draining at `rate` units per second.
    /// Two numbers of one type in a row are easy to swap: use
    /// [`Quota::per_second`]`(rate).burst(size)`.
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// use dripfeed::keyed::Quota;
    /// assert_eq!(Quota::new(10.0, 2.0)?, Quota::per_second(2.0).burst(10.0)?);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    #[deprecated(since = "0.2.0", note = "use Quota::per_second(rate).burst(size)")]
    pub fn new(size: f64, rate: f64) -> Result<Self, QuotaError> {
        Self::checked(size, rate)
    }

    /// Both finite and positive, else the error naming which.
    fn checked(size: f64, rate: f64) -> Result<Self, QuotaError> {
        if !(size.is_finite() && size > 0.0) {
            return Err(QuotaError::InvalidSize(size));
        }
        if !(rate.is_finite() && rate > 0.0) {
            return Err(QuotaError::InvalidRate(rate));
        }
        Ok(Self { size, rate })
    }

    /// The bucket size.
    ///
    /// ```
    /// # use dripfeed::keyed::Quota;
    /// assert_eq!(Quota::per_second(1.0).burst(5.0)?.size(), 5.0);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn size(&self) -> f64 {
        self.size
    }

    /// The drain rate, in debt units per second.
    ///
    /// ```
    /// # use dripfeed::keyed::Quota;
    /// assert_eq!(Quota::per_second(0.5).burst(5.0)?.rate(), 0.5);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// How long a full bucket takes to drain (`size / rate`), rounded up to
    /// the nanosecond and saturating at [`Duration::MAX`].
    ///
    /// ```
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// assert_eq!(Quota::per_second(4.0).burst(10.0)?.drain_time(), Duration::from_millis(2500));
    /// assert_eq!(Quota::per_second(f64::MIN_POSITIVE).burst(f64::MAX)?.drain_time(), Duration::MAX);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn drain_time(&self) -> Duration {
        secs_to_duration(self.size / self.rate)
    }
}

/// Why a [`Quota`] was refused.
///
/// ```
/// use dripfeed::keyed::{Quota, QuotaError};
/// let err = Quota::per_second(1.0).burst(-1.0).unwrap_err();
/// assert_eq!(err, QuotaError::InvalidSize(-1.0));
/// assert_eq!(err.to_string(), "quota size must be finite and positive, got -1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuotaError {
    /// The size was zero, negative, NaN or infinite.
    InvalidSize(f64),
    /// The rate was zero, negative, NaN or infinite.
    InvalidRate(f64),
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidSize(v) => write!(f, "quota size must be finite and positive, got {v}"),
            Self::InvalidRate(v) => write!(f, "quota rate must be finite and positive, got {v}"),
        }
    }
}

impl std::error::Error for QuotaError {}

/// An admitted cost: the debt it left and the room still free, for
/// `RateLimit` headers.
///
/// ```
/// use dripfeed::keyed::{Bucket, Quota};
/// use tokio::time::Instant;
/// let now = Instant::now();
/// let ok = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(10.0)?, 3.0, now)?;
/// assert_eq!((ok.debt(), ok.remaining(), ok.size()), (3.0, 7.0, 10.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admit {
    debt: f64,
    size: f64,
    rate: f64,
}

impl Admit {
    /// The bucket's debt after this admission (at most the size).
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let ok = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(4.0)?, 1.5, now)?;
    /// assert_eq!(ok.debt(), 1.5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debt(&self) -> f64 {
        self.debt
    }

    /// Room left for further cost right now: `size - debt`, never negative.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let ok = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(4.0)?, 4.0, now)?;
    /// assert_eq!(ok.remaining(), 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remaining(&self) -> f64 {
        let room = self.size - self.debt;
        if room > 0.0 { room } else { 0.0 }
    }

    /// The quota size that applied.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let ok = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(4.0)?, 1.0, now)?;
    /// assert_eq!(ok.size(), 4.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn size(&self) -> f64 {
        self.size
    }

    /// Time until the debt drains to zero (the `RateLimit` reset).
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # use std::time::Duration;
    /// # let now = tokio::time::Instant::now();
    /// let ok = Bucket::new(now).try_admit_at(&Quota::per_second(2.0).burst(4.0)?, 3.0, now)?;
    /// assert_eq!(ok.empty_after(), Duration::from_millis(1500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn empty_after(&self) -> Duration {
        secs_to_duration(self.debt / self.rate)
    }
}

/// A refusal because the bucket has no room for the cost yet.
///
/// ```
/// use dripfeed::keyed::{AdmitError, Bucket, Quota};
/// use std::time::Duration;
/// let now = tokio::time::Instant::now();
/// let q = Quota::per_second(4.0).burst(2.0)?;
/// let mut b = Bucket::new(now);
/// b.try_admit_at(&q, 2.0, now)?;
/// let Err(AdmitError::OverQuota(over)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
/// assert_eq!(over.retry_after(), Duration::from_millis(250));
/// assert_eq!((over.debt(), over.size()), (2.0, 2.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverQuota {
    retry_after: Duration,
    /// The quota that refused.
    quota: Quota,
    debt: f64,
}

impl OverQuota {
    /// The exact wait until the refused cost would fit,
    /// `(debt + cost - size) / rate`, rounded up to the nanosecond; no
    /// jitter (the caller adds it).
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # use std::time::Duration;
    /// # let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 1.0, now)?;
    /// let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 0.5, now) else { panic!() };
    /// assert_eq!(o.retry_after(), Duration::from_millis(500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The quota size of the key.
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 1.0, now)?;
    /// let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
    /// assert_eq!(o.size(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn size(&self) -> f64 {
        self.quota.size
    }

    /// The key's drain rate, units per second: with [`size`](Self::size),
    /// the [`quota`](Self::quota) that refused.
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(2.0).burst(4.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 4.0, now)?;
    /// let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
    /// assert_eq!((o.size(), o.rate()), (4.0, 2.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rate(&self) -> f64 {
        self.quota.rate
    }

    /// The quota that refused: the key's override or the default (a
    /// `RateLimit` header's window is its
    /// [`drain_time`](Quota::drain_time)).
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # use std::time::Duration;
    /// # let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(2.0).burst(4.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 4.0, now)?;
    /// let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 1.0, now) else { panic!() };
    /// assert_eq!((o.quota(), o.quota().drain_time()), (q, Duration::from_secs(2)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The key's current debt (before the refused cost).
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(1.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 0.75, now)?;
    /// let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 0.5, now) else { panic!() };
    /// assert_eq!(o.debt(), 0.75);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debt(&self) -> f64 {
        self.debt
    }
}

impl fmt::Display for OverQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "over quota, retry after {:?}", self.retry_after)
    }
}

impl std::error::Error for OverQuota {}

/// A cost that is not a finite number in the accepted range.
///
/// ```
/// use dripfeed::keyed::{Bucket, InvalidCost, Quota};
/// let now = tokio::time::Instant::now();
/// let err = Bucket::new(now).settle_at(&Quota::per_second(1.0).burst(1.0)?, 1.0, -2.0, now).unwrap_err();
/// assert_eq!(err.cost(), -2.0);
/// assert_eq!(err.to_string(), "invalid cost -2");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvalidCost {
    cost: f64,
}

impl InvalidCost {
    /// The offending value.
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// # let now = tokio::time::Instant::now();
    /// let e = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(1.0)?, 0.0, now).unwrap_err();
    /// let AdmitError::InvalidCost(bad) = e else { panic!() };
    /// assert_eq!(bad.cost(), 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost(&self) -> f64 {
        self.cost
    }
}

impl fmt::Display for InvalidCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid cost {}", self.cost)
    }
}

impl std::error::Error for InvalidCost {}

/// Why a cost was not admitted.
///
/// ```
/// use dripfeed::keyed::{AdmitError, Bucket, Quota};
/// let now = tokio::time::Instant::now();
/// let err = Bucket::new(now).try_admit_at(&Quota::per_second(1.0).burst(5.0)?, 6.0, now).unwrap_err();
/// assert_eq!(err, AdmitError::CostExceedsSize { cost: 6.0, size: 5.0 });
/// assert_eq!(err.to_string(), "cost 6 exceeds bucket size 5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AdmitError {
    /// No room yet: wait `retry_after` (HTTP 429).
    OverQuota(OverQuota),
    /// The cost is larger than the key's size: it can never be admitted.
    CostExceedsSize {
        /// The cost asked for.
        cost: f64,
        /// The key's quota size.
        size: f64,
    },
    /// The cost is NaN, infinite, zero or negative.
    InvalidCost(InvalidCost),
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OverQuota(o) => o.fmt(f),
            Self::CostExceedsSize { cost, size } => {
                write!(f, "cost {cost} exceeds bucket size {size}")
            }
            Self::InvalidCost(c) => c.fmt(f),
        }
    }
}

impl std::error::Error for AdmitError {}

impl From<OverQuota> for AdmitError {
    fn from(o: OverQuota) -> Self {
        Self::OverQuota(o)
    }
}

impl From<InvalidCost> for AdmitError {
    fn from(c: InvalidCost) -> Self {
        Self::InvalidCost(c)
    }
}

/// One reverse leaky bucket: a debt and the instant it was last brought up
/// to date. A bucket at zero debt is the same as a new one.
///
/// ```
/// use dripfeed::keyed::{Bucket, Quota};
/// use std::time::Duration;
/// let t0 = tokio::time::Instant::now();
/// let q = Quota::per_second(2.0).burst(10.0)?;
/// let mut b = Bucket::new(t0);
/// b.try_admit_at(&q, 10.0, t0)?;
/// assert!(b.can_admit_at(&q, 1.0, t0).is_err());
/// assert_eq!(b.debt_at(&q, t0 + Duration::from_secs(2)), 6.0);
/// assert_eq!(b.empty_at(&q), Some(t0 + Duration::from_secs(5)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    debt: f64,
    last: Instant,
}

impl Bucket {
    /// An empty bucket (zero debt) as of `now`.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// let now = tokio::time::Instant::now();
    /// assert_eq!(Bucket::new(now).debt_at(&Quota::per_second(1.0).burst(1.0)?, now), 0.0);
    /// # Ok::<(), dripfeed::keyed::QuotaError>(())
    /// ```
    pub fn new(now: Instant) -> Self {
        Self {
            debt: 0.0,
            last: now,
        }
    }

    fn drained(&self, quota: &Quota, now: Instant) -> f64 {
        let nanos = now.saturating_duration_since(self.last).as_nanos();
        drain(
            self.debt,
            elapsed_secs(u64::try_from(nanos).unwrap_or(u64::MAX)),
            quota.rate,
        )
    }

    /// The debt at `now`: `max(0, debt - (now - last) × rate)`. An instant
    /// before the last update counts as no time elapsed.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # use std::time::Duration;
    /// let t0 = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(4.0)?;
    /// let mut b = Bucket::new(t0);
    /// b.try_admit_at(&q, 3.0, t0)?;
    /// assert_eq!(b.debt_at(&q, t0 + Duration::from_secs(1)), 2.0);
    /// assert_eq!(b.debt_at(&q, t0 + Duration::from_secs(9)), 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debt_at(&self, quota: &Quota, now: Instant) -> f64 {
        self.drained(quota, now)
    }

    /// When the debt reaches zero: `last + debt / rate`, or `None` if that
    /// instant is too far away to represent.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// # use std::time::Duration;
    /// let t0 = tokio::time::Instant::now();
    /// let q = Quota::per_second(2.0).burst(4.0)?;
    /// let mut b = Bucket::new(t0);
    /// b.try_admit_at(&q, 3.0, t0)?;
    /// assert_eq!(b.empty_at(&q), Some(t0 + Duration::from_millis(1500)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn empty_at(&self, quota: &Quota) -> Option<Instant> {
        self.last
            .checked_add(secs_to_duration(self.debt / quota.rate))
    }

    /// Whether `cost` would be admitted at `now`, changing nothing.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(2.0)?;
    /// let b = Bucket::new(now);
    /// assert!(b.can_admit_at(&q, 2.0, now).is_ok());
    /// assert_eq!(b, Bucket::new(now));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn can_admit_at(&self, quota: &Quota, cost: f64, now: Instant) -> Result<(), AdmitError> {
        check_cost(cost, quota)?;
        decide(self.drained(quota, now), cost, quota)?;
        Ok(())
    }

    /// Admits `cost` at `now` if `debt_now + cost <= size`, adding it to
    /// the debt; a refusal changes nothing.
    ///
    /// ```
    /// # use dripfeed::keyed::{AdmitError, Bucket, Quota};
    /// let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(2.0)?;
    /// let mut b = Bucket::new(now);
    /// assert_eq!(b.try_admit_at(&q, 1.5, now)?.debt(), 1.5);
    /// assert!(matches!(b.try_admit_at(&q, 1.0, now), Err(AdmitError::OverQuota(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_admit_at(
        &mut self,
        quota: &Quota,
        cost: f64,
        now: Instant,
    ) -> Result<Admit, AdmitError> {
        check_cost(cost, quota)?;
        let admit = decide(self.drained(quota, now), cost, quota)?;
        self.debt = admit.debt;
        self.last = self.last.max(now);
        Ok(admit)
    }

    /// Corrects an admitted `estimated` cost to the `actual` one at `now`
    /// (both finite and non-negative): a refund or extra debt. Extra debt may
    /// take the bucket above its size; debt never goes below zero. Returns
    /// the new debt.
    ///
    /// ```
    /// # use dripfeed::keyed::{Bucket, Quota};
    /// let now = tokio::time::Instant::now();
    /// let q = Quota::per_second(1.0).burst(2.0)?;
    /// let mut b = Bucket::new(now);
    /// b.try_admit_at(&q, 2.0, now)?;
    /// assert_eq!(b.settle_at(&q, 2.0, 5.0, now)?, 5.0);
    /// assert_eq!(b.settle_at(&q, 9.0, 0.0, now)?, 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_at(
        &mut self,
        quota: &Quota,
        estimated: f64,
        actual: f64,
        now: Instant,
    ) -> Result<f64, InvalidCost> {
        check_settle(estimated, actual)?;
        self.debt = settle_debt(self.drained(quota, now), estimated, actual);
        self.last = self.last.max(now);
        Ok(self.debt)
    }
}

/// Nanoseconds as seconds, the one conversion every caller shares.
pub(crate) fn elapsed_secs(nanos: u64) -> f64 {
    nanos as f64 / NANOS_PER_SEC
}

/// `max(0, debt - elapsed × rate)`; an overflowing product drains to zero.
pub(crate) fn drain(debt: f64, elapsed_secs: f64, rate: f64) -> f64 {
    let left = debt - elapsed_secs * rate;
    if left > 0.0 { left } else { 0.0 }
}

/// Checks a cost against a quota: finite, positive, at most the size.
pub(crate) fn check_cost(cost: f64, quota: &Quota) -> Result<(), AdmitError> {
    check_positive(cost)?;
    if cost > quota.size {
        return Err(AdmitError::CostExceedsSize {
            cost,
            size: quota.size,
        });
    }
    Ok(())
}

/// Checks that a cost is finite and positive: what a shared store can
/// refuse before its round trip, while the key's size comes back with it.
pub(crate) fn check_positive(cost: f64) -> Result<(), InvalidCost> {
    if cost.is_finite() && cost > 0.0 {
        Ok(())
    } else {
        Err(InvalidCost { cost })
    }
}

/// Admission of a checked `cost` against the drained debt.
pub(crate) fn decide(debt_now: f64, cost: f64, quota: &Quota) -> Result<Admit, OverQuota> {
    decide_within(debt_now, cost, quota, 0.0)
}

/// [`decide`], forgiving up to `slack` units past the size that the
/// caller's arithmetic cannot tell from it (the debt reported stays at
/// most the size).
pub(crate) fn decide_within(
    debt_now: f64,
    cost: f64,
    quota: &Quota,
    slack: f64,
) -> Result<Admit, OverQuota> {
    let after = debt_now + cost;
    if after <= quota.size + slack {
        Ok(Admit {
            debt: after.min(quota.size),
            size: quota.size,
            rate: quota.rate,
        })
    } else {
        Err(OverQuota {
            retry_after: secs_to_duration((after - quota.size) / quota.rate),
            quota: *quota,
            debt: debt_now,
        })
    }
}

/// The outcome of an admission decided elsewhere (by a shared store) that
/// left `debt_after` in the bucket.
#[cfg(feature = "postgres")]
pub(crate) fn admitted(debt_after: f64, quota: &Quota) -> Admit {
    Admit {
        debt: debt_after,
        size: quota.size,
        rate: quota.rate,
    }
}

/// Checks the two costs given to a settlement: finite and non-negative.
pub(crate) fn check_settle(estimated: f64, actual: f64) -> Result<(), InvalidCost> {
    for cost in [estimated, actual] {
        if !(cost.is_finite() && cost >= 0.0) {
            return Err(InvalidCost { cost });
        }
    }
    Ok(())
}

/// The debt after correcting `estimated` to `actual`: at least zero, at
/// most `f64::MAX`.
pub(crate) fn settle_debt(debt_now: f64, estimated: f64, actual: f64) -> f64 {
    let debt = debt_now + (actual - estimated);
    if debt > 0.0 { debt.min(f64::MAX) } else { 0.0 }
}

/// Seconds as a [`Duration`], rounded up to the nanosecond: zero for
/// non-positive or NaN input, [`Duration::MAX`] past its range.
pub(crate) fn secs_to_duration(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    let whole = secs.floor();
    if whole >= u64::MAX as f64 {
        return Duration::MAX;
    }
    let mut s = whole as u64;
    let mut nanos = ((secs - whole) * NANOS_PER_SEC).ceil() as u64;
    if nanos >= 1_000_000_000 {
        nanos -= 1_000_000_000;
        s = match s.checked_add(1) {
            Some(s) => s,
            None => return Duration::MAX,
        };
    }
    // nanos < 1e9, so this cannot overflow.
    Duration::new(s, nanos as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_saturate_and_round_up() {
        assert_eq!(secs_to_duration(f64::NAN), Duration::ZERO);
        assert_eq!(secs_to_duration(-1.0), Duration::ZERO);
        assert_eq!(secs_to_duration(f64::INFINITY), Duration::MAX);
        assert_eq!(secs_to_duration(1e300), Duration::MAX);
        assert_eq!(secs_to_duration(f64::MIN_POSITIVE), Duration::from_nanos(1));
        assert_eq!(secs_to_duration(1.5), Duration::from_millis(1500));
        assert_eq!(secs_to_duration(0.999_999_999_9), Duration::from_secs(1));
        assert_eq!(drain(f64::MAX, f64::MAX, f64::MAX), 0.0);
    }

    #[test]
    fn hostile_inputs_give_values_or_errors() {
        let now = Instant::now();
        let tiny = Quota::per_second(f64::MIN_POSITIVE)
            .burst(f64::MIN_POSITIVE)
            .unwrap();
        let huge = Quota::per_second(f64::MAX).burst(f64::MAX).unwrap();
        for q in [tiny, huge] {
            let mut b = Bucket::new(now);
            for cost in [f64::NAN, f64::INFINITY, -0.0, 5e-324, 1e-300, f64::MAX] {
                let _ = b.try_admit_at(&q, cost, now);
                let _ = b.can_admit_at(&q, cost, now);
                let _ = b.settle_at(&q, cost, f64::MAX, now);
                assert!(b.debt_at(&q, now) >= 0.0);
                let _ = b.empty_at(&q);
            }
        }
        let far = now + Duration::from_secs(u64::MAX / 4);
        let mut b = Bucket::new(far);
        let slow = Quota::per_second(f64::MIN_POSITIVE).burst(1.0).unwrap();
        assert!(b.try_admit_at(&slow, 1.0, far).is_ok());
        assert_eq!(b.empty_at(&slow), None);
        assert_eq!(slow.drain_time(), Duration::MAX);
    }

    #[test]
    fn refusal_and_wait_are_exact() {
        let t0 = Instant::now();
        let q = Quota::per_second(2.0).burst(8.0).unwrap();
        let mut b = Bucket::new(t0);
        b.try_admit_at(&q, 8.0, t0).unwrap();
        let Err(AdmitError::OverQuota(o)) = b.try_admit_at(&q, 3.0, t0) else {
            panic!("expected over quota")
        };
        assert_eq!(o.retry_after(), Duration::from_millis(1500));
        let later = t0 + o.retry_after();
        assert!(b.can_admit_at(&q, 3.0, later).is_ok());
        assert!(
            b.can_admit_at(&q, 3.0, later - Duration::from_nanos(1))
                .is_err()
        );
        // A clock read that went backwards drains nothing.
        assert_eq!(b.debt_at(&q, t0 - Duration::from_secs(1)), 8.0);
    }
}
