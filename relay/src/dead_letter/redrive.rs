//! `--redrive FILE`: the webhooks of a dead-letter file admitted again
//! (once the receiver is healthy) through the destinations set and its
//! journal, each under the id it had, so a receiver that saw an earlier
//! attempt can deduplicate. Each goes to the destination its line names
//! (by name, or by URL for lines an older relay wrote); with one
//! destination, there. The file is only read: the relay refuses to redrive
//! the file it writes its own dead letters to.
//!
//! Every line that is not re-admitted (refused by a full queue or the byte
//! budget, naming a destination no longer configured, or unreadable) is
//! written verbatim to `FILE.rest`, synced, so nothing is lost: redrive
//! that file later for the rest. A `FILE.rest` left by an earlier redrive
//! must be redriven or moved away first (the relay refuses to start).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use base64::Engine;
use dripfeed::destinations::Destinations;
use serde::Deserialize;

use crate::domain::budget::ByteBudget;
use crate::domain::job::Job;

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
    /// Refused: a full queue or byte budget, or a destination no longer
    /// configured.
    pub refused: u64,
    /// Lines that do not parse.
    pub unreadable: u64,
    /// Lines written to [`rest_of`] the file: every refused and unreadable one.
    pub kept: u64,
}

/// Where a redrive of `path` keeps the lines it did not re-admit: `FILE.rest`.
pub fn rest_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".rest");
    PathBuf::from(name)
}

/// Refuses to redrive `path` if it is the relay's own dead-letter file
/// `own`, or if an earlier redrive's `FILE.rest` holds lines.
pub fn check_source(path: &Path, own: &Path) -> Result<(), String> {
    let from = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if std::fs::canonicalize(own).is_ok_and(|own| own == from) {
        return Err(format!(
            "{} is this relay's own dead_letter_file: move it aside (or give another \
             dead_letter_file) and redrive the moved file",
            path.display()
        ));
    }
    let rest = rest_of(path);
    if std::fs::metadata(&rest).is_ok_and(|m| m.len() > 0) {
        return Err(format!(
            "{} holds the lines an earlier redrive could not re-admit: redrive it (or move it \
             aside) first",
            rest.display()
        ));
    }
    Ok(())
}

/// The lines a redrive keeps, in `FILE.rest` (made at the first one).
struct Rest {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    lines: u64,
}

impl Rest {
    fn keep(&mut self, line: &str) -> Result<(), String> {
        let err = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let out = match &mut self.out {
            Some(out) => out,
            None => self
                .out
                .insert(BufWriter::new(File::create(&self.path).map_err(err)?)),
        };
        let written = out
            .write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"));
        written.map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.lines += 1;
        Ok(())
    }

    /// Writes out and syncs what was kept.
    fn close(self) -> Result<u64, String> {
        let err = |e: std::io::Error| format!("{}: {e}", self.path.display());
        if let Some(out) = self.out {
            let file = out.into_inner().map_err(|e| err(e.into_error()))?;
            file.sync_all().map_err(err)?;
            let dir = match self.path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
        }
        Ok(self.lines)
    }
}

/// Re-admits every line of `path` into `set`; `targets` are the
/// configured destinations, name and URL. The lines not re-admitted go to
/// [`rest_of`] `path`; an error there (the source file is untouched) ends
/// the redrive.
pub async fn redrive(
    path: &Path,
    set: &Destinations<Job>,
    targets: &[(Arc<str>, String)],
    budget: &ByteBudget,
) -> Result<Redriven, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut done = Redriven::default();
    let mut rest = Rest {
        path: rest_of(path),
        out: None,
        lines: 0,
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some(letter) = parse(line) else {
            done.unreadable += 1;
            rest.keep(line)?;
            continue;
        };
        let name = route(letter.destination.as_deref(), targets);
        let job = name.and_then(|_| job_of(letter, budget));
        let (Some(name), Some(job)) = (name, job) else {
            done.refused += 1;
            rest.keep(line)?;
            continue;
        };
        match set.try_submit_durable(name, job).await {
            Ok(_) => done.readmitted += 1,
            Err(_) => {
                done.refused += 1;
                rest.keep(line)?;
            }
        }
    }
    done.kept = rest.close()?;
    Ok(done)
}

/// The destination and job of one dead-letter line: `None` when it does
/// not parse, names no configured destination, or the byte budget has no
/// room for its body.
pub fn job_of_line<'a>(
    line: &str,
    targets: &'a [(Arc<str>, String)],
    budget: &ByteBudget,
) -> Option<(&'a str, Job)> {
    let letter = parse(line)?;
    let name = route(letter.destination.as_deref(), targets)?;
    Some((name, job_of(letter, budget)?))
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

/// A line as the relay writes it, `None` if it does not parse (or its
/// base64 body does not decode).
fn parse(line: &str) -> Option<Letter> {
    let letter: Letter = serde_json::from_str(line).ok()?;
    if let (None, Some(b64)) = (&letter.body, &letter.body_base64) {
        base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    }
    Some(letter)
}

/// The job a line describes, holding its bytes against the budget; `None`
/// when the budget has no room for its body.
fn job_of(letter: Letter, budget: &ByteBudget) -> Option<Job> {
    let body = match (letter.body, letter.body_base64) {
        (Some(text), _) => Bytes::from(text),
        (None, Some(b64)) => {
            Bytes::from(base64::engine::general_purpose::STANDARD.decode(b64).ok()?)
        }
        (None, None) => Bytes::new(),
    };
    let ticket = budget.try_take(body.len())?;
    let id = letter.id.and_then(|id| id.parse::<u64>().ok());
    Some(Job::redriven(
        body,
        letter.content_type,
        letter.tenant,
        letter.received_unix_ms.unwrap_or(0),
        id,
        ticket,
    ))
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
