//! A deterministic model of a fragile downstream of capacity C jobs/s: a
//! single FIFO server (service time 1/C) behind a base latency, so below C it
//! answers in the base latency and above C its backlog, and so its latency,
//! grows (a queue model, not a step function). Optional error bursts, an
//! outage window and load shedding with a Retry-After hint. Time is a
//! `tokio::time::Instant` the caller passes; randomness is seeded.
#![allow(dead_code)]

use std::error::Error;
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// An invalid simulation setting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SimError {
    /// Capacity was not finite and positive.
    Capacity(f64),
    /// A probability was outside `[0, 1]`.
    Probability(f64),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity(v) => write!(f, "capacity must be finite and above zero, got {v}"),
            Self::Probability(v) => write!(f, "probability must be in [0, 1], got {v}"),
        }
    }
}

impl Error for SimError {}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Delivered.
    Ok,
    /// The downstream answered with an error.
    Failed,
    /// No answer within the timeout.
    TimedOut,
    /// The downstream shed the request (503) with a `Retry-After` hint.
    Congested(Option<Duration>),
}

/// The answer to one request: how long it took and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Time from sending the request to its answer.
    pub latency: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

impl Served {
    /// Whether the request was delivered.
    pub(crate) fn ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// What an outage does to requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutageMode {
    /// Every request fails at once (after the base latency).
    Fail,
    /// Every request times out after this long.
    Timeout(Duration),
}

/// A downstream with a capacity of `C` jobs/s: a single FIFO server with
/// service time `1/C`, so a request's latency is
/// `base + wait behind the backlog + 1/C`. Below `C` nothing queues; above it
/// the backlog (and the latency) grows by `(rate − C)/C` seconds per second.
///
/// Optional troubles: an outage window (every request fails or times out, the
/// server is untouched), error bursts (each request fails with a probability,
/// after being served), a timeout, and shedding (a request that would wait
/// longer than a bound gets a 503 with a `Retry-After` hint at once).
#[derive(Debug, Clone)]
pub(crate) struct FragileDownstream {
    service: Duration,
    base: Duration,
    free_at: Option<Instant>,
    outage: Option<(Instant, Instant, OutageMode)>,
    bursts: Vec<(Instant, Instant, f64)>,
    timeout: Option<Duration>,
    jitter: Duration,
    shed: Option<(Duration, Option<Duration>)>,
    rng: fastrand::Rng,
}

impl FragileDownstream {
    /// A healthy downstream of `capacity` jobs/s with a `base` latency.
    pub(crate) fn new(capacity: f64, base: Duration) -> Result<Self, SimError> {
        if !(capacity.is_finite() && capacity > 0.0) {
            return Err(SimError::Capacity(capacity));
        }
        let service = Duration::try_from_secs_f64(1.0 / capacity)
            .map_err(|_| SimError::Capacity(capacity))?;
        Ok(Self {
            service,
            base,
            free_at: None,
            outage: None,
            bursts: Vec::new(),
            timeout: None,
            jitter: Duration::ZERO,
            shed: None,
            rng: fastrand::Rng::with_seed(0),
        })
    }

    /// Seeds the RNG used by error bursts (default seed 0).
    pub(crate) fn with_seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// An outage over `[start, end)`.
    pub(crate) fn with_outage(mut self, start: Instant, end: Instant, mode: OutageMode) -> Self {
        self.outage = Some((start, end, mode));
        self
    }

    /// Requests served within `[start, end)` fail with `probability`.
    pub(crate) fn with_error_burst(
        mut self,
        start: Instant,
        end: Instant,
        probability: f64,
    ) -> Result<Self, SimError> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(SimError::Probability(probability));
        }
        self.bursts.push((start, end, probability));
        Ok(self)
    }

    /// Adds a uniformly random extra latency in `[0, jitter)` to every
    /// answer, outside the server (network noise).
    pub(crate) fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Requests slower than `timeout` time out (they still used the server).
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// A request that would wait longer than `max_wait` is shed at once with
    /// a 503 carrying `retry_after`.
    pub(crate) fn with_shedding(
        mut self,
        max_wait: Duration,
        retry_after: Option<Duration>,
    ) -> Self {
        self.shed = Some((max_wait, retry_after));
        self
    }

    /// Sends one request at `now` and returns its latency and outcome.
    pub(crate) fn serve(&mut self, now: Instant) -> Served {
        if let Some((start, end, mode)) = self.outage
            && now >= start
            && now < end
        {
            return match mode {
                OutageMode::Fail => served(self.base, Outcome::Failed),
                OutageMode::Timeout(t) => served(t, Outcome::TimedOut),
            };
        }
        let begin = self.free_at.map_or(now, |free| free.max(now));
        let wait = begin.saturating_duration_since(now);
        if let Some((max_wait, hint)) = self.shed
            && wait > max_wait
        {
            return served(self.base, Outcome::Congested(hint));
        }
        // Past the clock's range the server is simply never free again.
        let done = begin.checked_add(self.service).unwrap_or(begin);
        self.free_at = Some(done);
        let noise = self.jitter.mul_f64(self.rng.f64());
        let latency = self
            .base
            .saturating_add(done.saturating_duration_since(now))
            .saturating_add(noise);
        if let Some(timeout) = self.timeout
            && latency > timeout
        {
            return served(timeout, Outcome::TimedOut);
        }
        let p_fail = self
            .bursts
            .iter()
            .filter(|(s, e, _)| now >= *s && now < *e)
            .map(|(_, _, p)| *p)
            .fold(0.0, f64::max);
        if p_fail > 0.0 && self.rng.f64() < p_fail {
            return served(latency, Outcome::Failed);
        }
        served(latency, Outcome::Ok)
    }
}

fn served(latency: Duration, outcome: Outcome) -> Served {
    Served { latency, outcome }
}
