//! One destination's lane of the fleet's queue (`shared`): its
//! queue in Redis and what bounds it, and how an entry's id reads as the
//! webhook's number. Shared by the intake side and the drains.

use std::sync::Arc;

use super::redis::queue::RedisQueue;

use super::counts::Counts;
use super::steer::Steer;
use crate::domain::limits::held;

/// One destination's queue and what bounds it.
#[derive(Clone)]
pub(crate) struct Lane {
    pub(crate) queue: RedisQueue,
    pub(crate) rate: f64,
    pub(crate) budget: std::time::Duration,
    /// This relay's metrics for it (kept across changes of the lane).
    pub(crate) counts: Arc<Counts>,
    /// False once deleted: no admissions, no redrives; its dead letters
    /// still listed.
    pub(crate) open: bool,
    /// With `adaptive`: the fleet's rate for it, as this relay knows it
    /// (kept across changes of the lane).
    pub(crate) steer: Option<Arc<Steer>>,
    /// The destination's own adaptive ceiling, if it has one.
    pub(crate) ceiling: Option<f64>,
}

impl Lane {
    /// The rate in force: the fleet's adaptive one, else the configured.
    pub(crate) fn rate_now(&self) -> f64 {
        self.steer.as_ref().map_or(self.rate, |s| s.rate())
    }

    /// The bound in force: `budget × rate` at the rate in force, so the
    /// latency budget holds while an adaptive rate moves.
    pub(crate) fn bound_now(&self) -> u64 {
        held(self.budget, self.rate_now()) as u64
    }
}

/// An entry's id as the webhook's number (ids are given as numbers; an
/// entry written otherwise is known by its stream id `MS-SEQ`, as
/// `MS × 2^20 + SEQ`).
pub(crate) fn number_of(id: &str) -> u64 {
    if let Ok(n) = id.parse() {
        return n;
    }
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    let ms: u64 = ms.parse().unwrap_or(0);
    let seq: u64 = seq.parse().unwrap_or(0);
    (ms << 20) | (seq & 0xF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_number_or_its_stream_ids() {
        assert_eq!(
            number_of("12345678901234567890"),
            12_345_678_901_234_567_890
        );
        assert_eq!(number_of("1700000000000-0"), 1_700_000_000_000 << 20);
        assert_eq!(number_of("1700000000000-5"), (1_700_000_000_000 << 20) | 5);
        assert!(number_of("1700000000001-0") > number_of("1700000000000-9"));
    }
}
