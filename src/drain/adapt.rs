//! Adaptation: delivery tasks report each attempt's latency and ending
//! through the [`Feedback`] queue; the drain feeds them into the sliding
//! [`LatencyWindow`] and, once per interval, asks the [`Aimd`] controller for
//! the next rate.

use std::time::Duration;

use tokio::time::Instant;

use crate::drain::downstream::Delivery;
use crate::drain::feedback::{AttemptEnd, Feedback};
use crate::rate::{Aimd, LatencyWindow, MAX_PAUSE};

/// The sliding window's span and sub-windows.
const WINDOW: Duration = Duration::from_secs(5);
const SUB_WINDOWS: usize = 5;

/// The drain's adaptive state.
pub(crate) struct Adapt {
    aimd: Aimd,
    window: LatencyWindow,
    went_idle: bool,
    saturated: bool,
    /// When the latest `Retry-After` hint reported runs out: a pause the
    /// controller asks for ends there, counted from the answer that gave
    /// it, not from the decision (an idle drain decides late).
    hint_ends: Option<Instant>,
}

impl Adapt {
    pub(crate) fn new(aimd: Aimd) -> Option<Self> {
        let window = LatencyWindow::new(WINDOW, SUB_WINDOWS).ok()?;
        Some(Adapt {
            aimd,
            window,
            went_idle: false,
            saturated: false,
            hint_ends: None,
        })
    }

    /// The queue ran dry at a due instant, or emission was paused, since
    /// the last decision: no evidence for a higher rate.
    pub(crate) fn went_idle(&mut self) {
        self.went_idle = true;
    }

    /// Every delivery slot was busy at a due instant since the last decision.
    pub(crate) fn saturated(&mut self) {
        self.saturated = true;
    }

    /// Moves reported samples into the window.
    pub(crate) fn absorb(&mut self, feedback: &Feedback) {
        while let Some(s) = feedback.pop() {
            match s.ended {
                AttemptEnd::Answered(Delivery::Done) => self.window.record(s.at, s.latency),
                AttemptEnd::Answered(Delivery::Retry { after: Some(hint) }) => {
                    self.window.record_congestion(s.at, Some(hint));
                    // As long as a pause may be: a longer hint's end would
                    // outlive its pause and stretch a later one.
                    let ends = s.at + hint.min(MAX_PAUSE);
                    self.hint_ends = Some(self.hint_ends.map_or(ends, |e| e.max(ends)));
                }
                AttemptEnd::Answered(_) | AttemptEnd::Panicked => self.window.record_failure(s.at),
                AttemptEnd::TimedOut => self.window.record_timeout(s.at),
            }
        }
    }

    /// When an interval has passed: the new rate (if it changed) and a pause
    /// the downstream asked for.
    pub(crate) fn decide(&mut self, now: Instant, rate: f64) -> Option<(f64, Option<Duration>)> {
        if !self.aimd.due(now) {
            return None;
        }
        let busy = !self.went_idle || self.saturated;
        self.went_idle = false;
        self.saturated = false;
        let summary = self.window.summary(now);
        let decision = self.aimd.decide(now, rate, &summary, busy);
        let pause = decision.pause.and_then(|p| {
            let left = self
                .hint_ends
                .map_or(p, |ends| p.min(ends.saturating_duration_since(now)));
            (!left.is_zero()).then_some(left)
        });
        decision.changed().then_some((decision.rate, pause))
    }
}
