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

/// The error of an attempt a stop cut short (the relay's grace ended
/// before its answer): not counted among the copy's attempts.
pub(crate) const STOPPED: &str = "stopped";

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
    /// Times it was sent again (a resend, a recover, a redrive).
    #[serde(default)]
    pub resent: u32,
    /// Attempts made in all, those a stop cut short left out (`attempts`
    /// keeps the latest only); `None` in a record written before they
    /// were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made: Option<u32>,
    /// [`made`](Self::made) when it was last sent again (a resend, a
    /// recover, a redrive): the attempts of its round are those after, and
    /// a copy sent again at a start goes on from them.
    #[serde(default)]
    pub round_from: u32,
    /// When its receiver asked to be tried again (its last attempt's
    /// `Retry-After`, at most `retry_max` away), ms since the Unix epoch:
    /// a copy sent again at a start waits for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u64>,
}

impl CopyRecord {
    /// A copy just made.
    pub(crate) fn pending() -> CopyRecord {
        CopyRecord {
            state: CopyState::Pending,
            reason: None,
            attempts: Vec::new(),
            resent: 0,
            made: Some(0),
            round_from: 0,
            retry_at_ms: None,
        }
    }

    /// Attempts made in all (a record written before they were counted:
    /// those it keeps, but for those a stop cut short, which that build
    /// listed too).
    pub(crate) fn made_in_all(&self) -> u32 {
        self.made.unwrap_or_else(|| {
            let kept = self.attempts.iter();
            let made = kept.filter(|a| a.error.as_deref() != Some(STOPPED)).count();
            u32::try_from(made).unwrap_or(u32::MAX)
        })
    }

    /// Attempts made since it was last sent again (a resend, a recover, a
    /// redrive): those a copy sent again at a start goes on from. A record
    /// written before attempts were counted, of a copy sent again since it
    /// was made, does not say where its round began: none.
    pub(crate) fn made_this_round(&self) -> u32 {
        match self.made {
            None if self.resent > 0 => 0,
            _ => self.made_in_all().saturating_sub(self.round_from),
        }
    }

    /// An attempt was made: counted, unless a stop cut it short (`counts`
    /// false: the copy is sent again at the next start, as the journal's
    /// webhooks are, with the attempt not counted). A record written
    /// before attempts were counted starts counting here; its round, if
    /// it was sent again since it was made, starts here too.
    pub(crate) fn count_attempt(&mut self, counts: bool) {
        if self.made.is_none() && self.resent > 0 {
            self.round_from = self.made_in_all();
        }
        self.made = Some(self.made_in_all().saturating_add(u32::from(counts)));
    }

    /// Sent again (a resend, a recover, a redrive): a new round begins.
    pub(crate) fn begin_round(&mut self) {
        let made = self.made_in_all();
        self.made = Some(made);
        self.round_from = made;
        self.retry_at_ms = None;
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
        /// When the receiver asked to be tried again (its `Retry-After`,
        /// at most `retry_max` away), ms since the Unix epoch.
        retry_at_ms: Option<u64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> AttemptRecord {
        AttemptRecord {
            at_ms: 0,
            status: 503,
            duration_ms: 1,
            error: Some("status".to_owned()),
            response: None,
        }
    }

    #[test]
    fn a_round_counts_its_attempts_but_not_one_a_stop_cut_short() {
        let mut copy = CopyRecord::pending();
        copy.count_attempt(true);
        copy.count_attempt(true);
        copy.count_attempt(false);
        assert_eq!((copy.made_in_all(), copy.made_this_round()), (2, 2));
        copy.begin_round();
        assert_eq!(copy.made_this_round(), 0, "a resend starts a round");
        copy.count_attempt(true);
        assert_eq!((copy.made_in_all(), copy.made_this_round()), (3, 1));
    }

    #[test]
    fn a_record_from_before_the_count_goes_by_what_it_kept() {
        let old = r#"{"state":"pending","attempts":[{"at_ms":0,"status":503,"duration_ms":1}],"resent":0}"#;
        let mut copy: CopyRecord = serde_json::from_str(old).unwrap();
        assert_eq!(
            copy.made_this_round(),
            1,
            "never sent again: all its attempts"
        );
        copy.count_attempt(true);
        assert_eq!(copy.made_this_round(), 2);
        // An attempt a stop cut short, listed by that build: not counted.
        let stopped = r#"{"state":"pending","attempts":[{"at_ms":0,"status":503,"duration_ms":1},{"at_ms":1,"status":0,"duration_ms":1,"error":"stopped"}],"resent":0}"#;
        let copy: CopyRecord = serde_json::from_str(stopped).unwrap();
        assert_eq!((copy.made_in_all(), copy.made_this_round()), (1, 1));

        // Sent again since it was made: where its round began is unknown,
        // so it begins at the first attempt counted.
        let mut resent = CopyRecord {
            resent: 1,
            made: None,
            attempts: vec![failed(); 5],
            ..CopyRecord::pending()
        };
        assert_eq!(resent.made_this_round(), 0);
        resent.count_attempt(true);
        assert_eq!((resent.made_in_all(), resent.made_this_round()), (6, 1));
    }
}
