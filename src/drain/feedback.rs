//! Feedback from deliveries to the drain: how each attempt ended and how long
//! it took, passed through a bounded lock-free queue the drain empties into
//! its latency window (see [`rate`](crate::rate)).

use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use tokio::time::Instant;

use crate::drain::downstream::Delivery;

/// Samples waiting for the drain; beyond this they are dropped (the window
/// only needs a statistically useful share, and dropping one loses no job).
const SAMPLE_QUEUE: usize = 8192;

/// How one delivery attempt ended, as a [`DrainHook`](crate::DrainHook) is told.
///
/// ```
/// use dripfeed::{AttemptEnd, Delivery};
/// assert!(AttemptEnd::Answered(Delivery::Done).is_done());
/// assert!(!AttemptEnd::TimedOut.is_done());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The downstream answered.
    Answered(Delivery),
    /// It ran past `deliver_timeout`.
    TimedOut,
    /// It panicked.
    Panicked,
}

impl AttemptEnd {
    /// Whether the job was delivered.
    pub fn is_done(self) -> bool {
        self == AttemptEnd::Answered(Delivery::Done)
    }
}

/// One finished attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) at: Instant,
    pub(crate) latency: Duration,
    pub(crate) ended: AttemptEnd,
}

/// The queue of samples from deliveries (or granted slots) to the drain.
pub(crate) struct Feedback {
    samples: ArrayQueue<Sample>,
}

impl Feedback {
    pub(crate) fn new() -> Self {
        Feedback {
            samples: ArrayQueue::new(SAMPLE_QUEUE),
        }
    }

    /// Reports an attempt that took `latency` and ended now.
    pub(crate) fn report(&self, latency: Duration, ended: AttemptEnd) {
        // Full: the window has plenty; dropping a sample loses no job.
        let _ = self.samples.push(Sample {
            at: Instant::now(),
            latency,
            ended,
        });
    }

    /// Takes the oldest sample.
    pub(crate) fn pop(&self) -> Option<Sample> {
        self.samples.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reports_latency_and_when() {
        let fb = Feedback::new();
        fb.report(Duration::from_millis(30), AttemptEnd::TimedOut);
        let s = fb.pop().map(|s| (s.latency, s.ended, s.at));
        let at = Instant::now();
        assert_eq!(
            s,
            Some((Duration::from_millis(30), AttemptEnd::TimedOut, at))
        );
        assert!(fb.pop().is_none());
        assert!(AttemptEnd::Answered(Delivery::Done).is_done());
    }
}
