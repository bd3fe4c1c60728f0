//! What a [`RedisQueue`](super::queue::RedisQueue) knows of one job, by its id,
//! once [`with_status`](super::queue::RedisQueue::with_status) keeps it: the
//! record its scripts write beside the stream, read from any node.

use std::time::Duration;

/// Where a job of a shared queue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Waiting in the stream for its first attempt (or its next one, once
    /// a retry is due).
    Queued,
    /// A consumer holds it: it is being delivered.
    InFlight,
    /// An attempt failed; the next one is due at `next_attempt_unix_ms`.
    RetryWaiting,
    /// Ended: delivered.
    Delivered,
    /// Ended: dead-lettered.
    DeadLettered,
}

/// A job's status ([`RedisQueue::status`](super::queue::RedisQueue::status)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobStatus {
    /// Where it is.
    pub state: JobState,
    /// Attempts made.
    pub attempts: u32,
    /// The receiver's last status code, if it answered one.
    pub last_status: Option<u16>,
    /// When the next attempt is due, ms since the Unix epoch (Redis's
    /// clock), while [`JobState::RetryWaiting`].
    pub next_attempt_unix_ms: Option<u64>,
    /// When it was admitted, ms since the Unix epoch (Redis's clock).
    pub received_unix_ms: u64,
    /// When it ended, ms since the Unix epoch (Redis's clock).
    pub ended_unix_ms: Option<u64>,
    /// Its owner as admitted ([`RedisQueue::admit_owned`](super::queue::RedisQueue::admit_owned)).
    pub owner: Option<String>,
    /// Its last failed attempt's error, as the consumer gave it
    /// ([`RedisQueue::retry_failed`](super::queue::RedisQueue::retry_failed),
    /// [`Ending::with_error`]).
    pub last_error: Option<String>,
}

impl JobStatus {
    /// Reads a record (`state|attempts|last|next|received|ended|stream
    /// id|owner`), `held` if a consumer holds its entry now.
    pub(crate) fn parse(record: &str, held: bool) -> Option<JobStatus> {
        let mut f = record.splitn(8, '|');
        let mut next = || f.next();
        let state = match (next()?, held) {
            ("q", true) => JobState::InFlight,
            ("q", false) => JobState::Queued,
            ("r", _) => JobState::RetryWaiting,
            ("d", _) => JobState::Delivered,
            ("x", _) => JobState::DeadLettered,
            _ => return None,
        };
        let attempts = next()?.parse().ok()?;
        let last_status = next()?.parse().ok();
        let next_attempt_unix_ms = next()?.parse().ok();
        let received_unix_ms = next()?.parse().ok()?;
        let ended_unix_ms = next()?.parse().ok();
        let _stream_id = next()?;
        let owner = Some(next()?).filter(|o| !o.is_empty()).map(str::to_owned);
        Some(JobStatus {
            state,
            attempts,
            last_status,
            next_attempt_unix_ms,
            received_unix_ms,
            ended_unix_ms,
            owner,
            last_error: None,
        })
    }
}

/// How a held job ended ([`RedisQueue::end`](super::queue::RedisQueue::end)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ending {
    /// The entry it was claimed as.
    pub stream_id: String,
    /// Dead-lettered (`true`) or delivered.
    pub dead_lettered: bool,
    /// The receiver's last status code, if it answered one.
    pub last_status: Option<u16>,
    /// Why it was dead-lettered (empty for a delivery).
    pub reason: String,
    /// Its last failed attempt's error (empty for none).
    pub error: String,
    /// Whether it ends an attempt (counted in its attempts); a job
    /// dead-lettered where it waited (its destination deleted, or it
    /// does not decode) was not sent.
    pub attempted: bool,
}

impl Ending {
    /// A delivery, answered `status`.
    pub(crate) fn delivered(stream_id: String, status: Option<u16>) -> Ending {
        Ending {
            stream_id,
            dead_lettered: false,
            last_status: status,
            reason: String::new(),
            error: String::new(),
            attempted: true,
        }
    }

    /// A job dead-lettered for `reason` after its last answer `status`.
    pub(crate) fn dead_lettered(stream_id: String, status: Option<u16>, reason: &str) -> Ending {
        Ending {
            stream_id,
            dead_lettered: true,
            last_status: status,
            reason: reason.to_owned(),
            error: String::new(),
            attempted: true,
        }
    }

    /// A job dead-lettered for `reason` where it waited, without being
    /// sent (its attempts stay what they were).
    pub(crate) fn unsent(stream_id: String, reason: &str) -> Ending {
        Ending {
            attempted: false,
            ..Ending::dead_lettered(stream_id, None, reason)
        }
    }

    /// The same ending, noting its last failed attempt's `error` (kept
    /// with its status, and with its dead letter).
    pub(crate) fn with_error(self, error: &str) -> Ending {
        Ending {
            error: error.to_owned(),
            ..self
        }
    }
}

/// How long, and how many, ended statuses are kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    pub(crate) retention: Duration,
    pub(crate) max: u64,
}

impl Keep {
    pub(crate) fn retention_ms(&self) -> u64 {
        u64::try_from(self.retention.as_millis()).unwrap_or(u64::MAX)
    }
}
