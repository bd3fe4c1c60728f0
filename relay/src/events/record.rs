//! What the events store keeps: each event (its application, type,
//! payload, the endpoints it went to), and each copy's state and attempts.

use serde::{Deserialize, Serialize};

/// The most attempts a copy keeps (its latest).
pub(crate) const MAX_ATTEMPTS: usize = 64;

/// An event, as posted.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct EventRecord {
    /// Its application.
    pub app: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it was taken, ms since the Unix epoch.
    pub created_ms: u64,
    /// The tenant that posted it, if tenants are named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Its `Idempotency-Key`, if it had one, scoped by its tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The endpoints it went to, by name.
    pub copies: Vec<String>,
}

/// Where a copy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CopyState {
    /// Queued, waiting for a retry, or in flight.
    Pending,
    /// Its receiver took it (2xx).
    Delivered,
    /// Dead-lettered (its reason says why): `recover` sends it again.
    DeadLettered,
}

/// One delivery attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptRecord {
    /// When it started, ms since the Unix epoch.
    pub at_ms: u64,
    /// The receiver's status; 0: no answer.
    pub status: u16,
    /// How long it took, ms.
    pub duration_ms: u64,
    /// The kind of error when it failed (`dns`, `connect`, `timeout`,
    /// `status`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The first bytes of the receiver's answer (`attempt_response_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// One endpoint's copy of an event.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CopyRecord {
    /// Where it is.
    pub state: CopyState,
    /// Why it was dead-lettered: `failed` (retries spent, or a final answer),
    /// `overflow`, `expired`, `shutdown`, `destination-deleted`,
    /// `application-deleted`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its attempts, oldest first (the latest [`MAX_ATTEMPTS`]).
    #[serde(default)]
    pub attempts: Vec<AttemptRecord>,
    /// Times it was sent again (resend, recover).
    #[serde(default)]
    pub resent: u32,
    /// Attempts made in all (`attempts` keeps the latest only).
    #[serde(default)]
    pub made: u32,
    /// [`made`](Self::made) when it was last sent again: the attempts of
    /// its round now are those after (a restart goes on counting them,
    /// within the endpoint's retries).
    #[serde(default)]
    pub round_from: u32,
}

impl CopyRecord {
    /// A copy just made.
    pub(crate) fn pending() -> CopyRecord {
        CopyRecord {
            state: CopyState::Pending,
            reason: None,
            attempts: Vec::new(),
            resent: 0,
            made: 0,
            round_from: 0,
        }
    }

    /// Attempts made in all (a record written before they were counted:
    /// those it keeps).
    pub(crate) fn made_in_all(&self) -> u32 {
        let kept = u32::try_from(self.attempts.len()).unwrap_or(u32::MAX);
        self.made.max(kept)
    }

    /// Attempts made since it was last sent (made, resent, recovered).
    pub(crate) fn made_this_round(&self) -> u32 {
        self.made_in_all().saturating_sub(self.round_from)
    }

    /// Whether an endpoint's listing of attempts shows it: all (`None`),
    /// only the failed (`Some(true)`) or only the delivered.
    pub(crate) fn listed(&self, failed: Option<bool>) -> bool {
        match failed {
            None => true,
            Some(true) => self.failed(),
            Some(false) => self.state == CopyState::Delivered,
        }
    }

    /// Whether its last attempt failed or it was dead-lettered: what
    /// `outcome=failed` lists.
    pub(crate) fn failed(&self) -> bool {
        self.state == CopyState::DeadLettered
            || self
                .attempts
                .last()
                .is_some_and(|a| !(200..300).contains(&a.status))
    }
}

/// What happened to a copy, as its delivery or the dead-letter file tells.
#[derive(Clone, Debug)]
pub(crate) enum Told {
    /// An attempt ended (not the last, or the last: `ended` says where the
    /// copy is then).
    Attempt {
        attempt: AttemptRecord,
        ended: Option<CopyState>,
    },
    /// Dead-lettered without (another) attempt: its reason (its letter
    /// written already, or none to write).
    DeadLettered(String),
    /// Dead-lettered, its reason; its letter is on its way to the
    /// dead-letter file: the copy stays listed as pending in the store
    /// until [`Told::Lettered`], so a restart in between writes its letter
    /// (never sends it again, never loses it).
    Lettering(String),
    /// Its letter is in the dead-letter file.
    Lettered,
}
