//! `--redrive FILE`: the webhooks of a dead-letter file admitted again
//! (once the receiver is healthy), through the relay's admission and its
//! journal, each under the id it had, so a receiver that saw an earlier
//! attempt can deduplicate. The file is only read: the relay refuses to
//! redrive the file it writes its own dead letters to.

use std::path::Path;

use axum::body::Bytes;
use base64::Engine;
use serde::Deserialize;

use crate::app::{Job, Relay};

/// A dead-letter line, as `dead_letter.rs` writes it.
#[derive(Deserialize)]
struct Letter {
    id: Option<String>,
    tenant: Option<String>,
    content_type: Option<String>,
    received_unix_ms: Option<u64>,
    body: Option<String>,
    body_base64: Option<String>,
}

/// What a redrive did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Redriven {
    pub readmitted: u64,
    pub refused: u64,
    pub unreadable: u64,
}

/// Re-admits every line of `path`.
pub async fn redrive(relay: &Relay, path: &Path) -> Result<Redriven, String> {
    let own = std::fs::canonicalize(&relay.cfg.dead_letter_file).ok();
    let from = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if own.as_ref() == Some(&from) {
        return Err(format!(
            "{} is this relay's own --dead-letter-file: move it aside (or pass another --dead-letter-file) and redrive the moved file",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(&from).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut done = Redriven::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some((id, job)) = job_of(relay, line) else {
            done.unreadable += 1;
            continue;
        };
        let admitted = match id {
            Some(id) => relay.throttle.resubmit(id, job).await,
            None => relay.throttle.try_submit_durable(job).await,
        };
        match admitted {
            Ok(_) => done.readmitted += 1,
            Err(_) => done.refused += 1,
        }
    }
    Ok(done)
}

/// The job a line describes, holding its bytes against the budget; `None`
/// for a line that does not parse or a body over the budget.
fn job_of(relay: &Relay, line: &str) -> Option<(Option<u64>, Job)> {
    let letter: Letter = serde_json::from_str(line).ok()?;
    let body = match (letter.body, letter.body_base64) {
        (Some(text), _) => Bytes::from(text),
        (None, Some(b64)) => {
            Bytes::from(base64::engine::general_purpose::STANDARD.decode(b64).ok()?)
        }
        (None, None) => Bytes::new(),
    };
    let ticket = relay.budget.try_take(body.len())?;
    let id = letter.id.and_then(|id| id.parse::<u64>().ok());
    let job = Job::redriven(
        body,
        letter.content_type,
        letter.tenant,
        letter.received_unix_ms.unwrap_or(0),
        ticket,
    );
    Some((id, job))
}
