//! `--redrive FILE`: the webhooks of a dead-letter file admitted again
//! (once the receiver is healthy) through the destinations set and its
//! journal, each under the id it had, so a receiver that saw an earlier
//! attempt can deduplicate. Each goes to the destination its line names
//! (by name, or by URL for lines an older relay wrote); with one
//! destination, there. The file is only read: the relay refuses to redrive
//! the file it writes its own dead letters to.

use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use base64::Engine;
use dripfeed::destinations::Destinations;
use serde::Deserialize;

use crate::intake::budget::ByteBudget;
use crate::intake::job::Job;

/// A dead-letter line, as `dead_letter` writes it.
#[derive(Deserialize)]
struct Letter {
    id: Option<String>,
    destination: Option<String>,
    tenant: Option<String>,
    content_type: Option<String>,
    received_unix_ms: Option<u64>,
    body: Option<String>,
    body_base64: Option<String>,
}

/// What a redrive did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Redriven {
    /// Admitted again.
    pub readmitted: u64,
    /// Refused: a full queue, or a destination no longer configured.
    pub refused: u64,
    /// Lines that do not parse, or bodies over the byte budget.
    pub unreadable: u64,
}

/// Refuses to redrive `path` if it is the relay's own dead-letter file `own`.
pub fn check_source(path: &Path, own: &Path) -> Result<(), String> {
    let from = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if std::fs::canonicalize(own).is_ok_and(|own| own == from) {
        return Err(format!(
            "{} is this relay's own dead_letter_file: move it aside (or give another \
             dead_letter_file) and redrive the moved file",
            path.display()
        ));
    }
    Ok(())
}

/// Re-admits every line of `path` into `set`; `targets` are the
/// configured destinations, name and URL.
pub async fn redrive(
    path: &Path,
    set: &Destinations<Job>,
    targets: &[(Arc<str>, String)],
    budget: &ByteBudget,
) -> Result<Redriven, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut done = Redriven::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some((destination, job)) = job_of(line, budget) else {
            done.unreadable += 1;
            continue;
        };
        let Some(name) = route(destination.as_deref(), targets) else {
            done.refused += 1;
            continue;
        };
        match set.try_submit_durable(name, job).await {
            Ok(_) => done.readmitted += 1,
            Err(_) => done.refused += 1,
        }
    }
    Ok(done)
}

/// The configured destination a line names, by name or URL; the only one
/// when there is one.
fn route<'a>(named: Option<&str>, targets: &'a [(Arc<str>, String)]) -> Option<&'a str> {
    let found = named.and_then(|n| targets.iter().find(|(name, url)| &**name == n || url == n));
    match (found, targets) {
        (Some((name, _)), _) => Some(name),
        (None, [(only, _)]) => Some(only),
        (None, _) => None,
    }
}

/// The job a line describes, holding its bytes against the budget; `None`
/// for a line that does not parse or a body over the budget.
fn job_of(line: &str, budget: &ByteBudget) -> Option<(Option<String>, Job)> {
    let letter: Letter = serde_json::from_str(line).ok()?;
    let body = match (letter.body, letter.body_base64) {
        (Some(text), _) => Bytes::from(text),
        (None, Some(b64)) => {
            Bytes::from(base64::engine::general_purpose::STANDARD.decode(b64).ok()?)
        }
        (None, None) => Bytes::new(),
    };
    let ticket = budget.try_take(body.len())?;
    let id = letter.id.and_then(|id| id.parse::<u64>().ok());
    let job = Job::redriven(
        body,
        letter.content_type,
        letter.tenant,
        letter.received_unix_ms.unwrap_or(0),
        id,
        ticket,
    );
    Some((letter.destination, job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_go_to_the_destination_they_name() {
        let targets: Vec<(Arc<str>, String)> = vec![
            (Arc::from("a"), "http://a/".into()),
            (Arc::from("b"), "http://b/".into()),
        ];
        assert_eq!(route(Some("b"), &targets), Some("b"));
        assert_eq!(route(Some("http://a/"), &targets), Some("a"));
        assert_eq!(route(Some("gone"), &targets), None);
        assert_eq!(route(None, &targets[..1]), Some("a"));
    }
}
