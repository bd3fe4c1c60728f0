//! A table's clock: the time of an operation, in nanoseconds since the
//! table was built.
//!
//! Operations given an instant (`try_admit_at`, …) take tokio's
//! [`Instant`], measured from the epoch taken when the table was built.
//! The others read a clock: tokio's by default, which follows tokio's
//! paused time (every paced test relies on it), or, with the `quanta`
//! feature and [`KeyedBucketsBuilder::quanta_clock`](super::KeyedBucketsBuilder::quanta_clock),
//! the CPU's cycle counter through the quanta crate (governor's clock).
//! The system clock's vDSO read orders itself after every load before it
//! (`rdtscp`), so a check's cache miss can no longer overlap the next
//! check's; quanta's plain `rdtsc` does not wait. On the benchmarks page's
//! keyed workload that is about 50 of a check's 110 ns.

use std::time::Duration;

use tokio::time::Instant;

/// Where a table reads the time.
pub(crate) struct TableClock {
    /// The table's build instant on tokio's clock.
    epoch: Instant,
    #[cfg(feature = "quanta")]
    cycles: Option<Cycles>,
}

/// Which clock a table is built to read (the builder's choice).
#[derive(Clone, Default)]
pub(crate) struct Source {
    #[cfg(feature = "quanta")]
    cycles: Option<quanta::Clock>,
}

impl Source {
    /// Whether it names the cycle counter.
    pub(crate) fn is_cycles(&self) -> bool {
        #[cfg(feature = "quanta")]
        return self.cycles.is_some();
        #[cfg(not(feature = "quanta"))]
        false
    }

    /// The cycle counter, through `clock`.
    #[cfg(feature = "quanta")]
    pub(crate) fn cycles(clock: quanta::Clock) -> Self {
        Source {
            cycles: Some(clock),
        }
    }
}

/// The cycle counter and its reading at the epoch.
#[cfg(feature = "quanta")]
struct Cycles {
    clock: quanta::Clock,
    start: quanta::Instant,
}

/// `d` in nanoseconds, saturating (in u64: `as_nanos`' u128 costs a check
/// a tenth of its time).
#[inline]
fn ns(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

impl TableClock {
    /// The clock `source` names, its epoch now.
    pub(crate) fn new(source: Source) -> Self {
        #[cfg(not(feature = "quanta"))]
        let Source {} = source;
        TableClock {
            epoch: Instant::now(),
            #[cfg(feature = "quanta")]
            cycles: source.cycles.map(|clock| Cycles {
                start: clock.now(),
                clock,
            }),
        }
    }

    /// Nanoseconds from the epoch to `at` (0 before it).
    #[inline]
    pub(crate) fn at(&self, at: Instant) -> u64 {
        ns(at.saturating_duration_since(self.epoch))
    }

    /// Nanoseconds from the epoch to now, on the table's clock.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        #[cfg(feature = "quanta")]
        if let Some(c) = &self.cycles {
            return ns(c.clock.now().saturating_duration_since(c.start));
        }
        self.at(Instant::now())
    }

    /// Whether the table reads the cycle counter.
    pub(crate) fn is_cycles(&self) -> bool {
        #[cfg(feature = "quanta")]
        return self.cycles.is_some();
        #[cfg(not(feature = "quanta"))]
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_s_clock_follows_paused_time() {
        let clock = TableClock::new(Source::default());
        assert!(!clock.is_cycles());
        tokio::time::advance(Duration::from_millis(3)).await;
        assert_eq!(clock.now(), 3_000_000);
        assert_eq!(
            clock.at(Instant::now() + Duration::from_secs(1)),
            1_003_000_000
        );
        assert_eq!(
            clock.at(clock.epoch - Duration::from_secs(1)),
            0,
            "before the epoch"
        );
    }

    #[cfg(feature = "quanta")]
    #[tokio::test(start_paused = true)]
    async fn the_cycle_counter_is_read_from_the_epoch_and_not_paused_time() {
        let (mock, time) = quanta::Clock::mock();
        time.increment(Duration::from_secs(5));
        let clock = TableClock::new(Source::cycles(mock));
        assert!(clock.is_cycles());
        assert_eq!(clock.now(), 0);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(clock.now(), 0, "tokio's time does not move it");
        time.increment(Duration::from_millis(7));
        assert_eq!(clock.now(), 7_000_000);
        assert_eq!(
            clock.at(Instant::now()),
            1_000_000_000,
            "given instants stay tokio's"
        );
    }
}
