//! Redriving dead letters, the pieces the admin API and `--redrive FILE`
//! share: a line read back ([`parse`], [`job_of`]), the destination it goes
//! to ([`route`]: only the one it came from), and `FILE.rest`, where
//! `--redrive` writes verbatim (and syncs) every line it did not re-admit,
//! so nothing is lost: redrive that file later for the rest. A `FILE.rest`
//! left by an earlier redrive must be redriven or moved away first (the
//! relay refuses to start), and the relay refuses to redrive the file it
//! writes its own dead letters to.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use base64::Engine;
use serde::Deserialize;

use crate::domain::budget::ByteBudget;
use crate::domain::job::Job;

/// A dead-letter line, as `dead_letter` writes it.
#[derive(Deserialize)]
pub(crate) struct Letter {
    /// The webhook's id.
    pub id: Option<String>,
    /// The destination it was dead-lettered from (its URL in lines an
    /// older relay wrote; absent in older still).
    pub destination: Option<String>,
    /// An event's copy: its event's type (its id is the event's).
    #[serde(default)]
    pub event_type: Option<String>,
    tenant: Option<String>,
    content_type: Option<String>,
    received_unix_ms: Option<u64>,
    body: Option<String>,
    body_base64: Option<String>,
}

/// Where a redrive of `path` keeps the lines it did not re-admit: `FILE.rest`.
pub(crate) fn rest_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".rest");
    PathBuf::from(name)
}

/// Refuses to redrive `path` if it is the relay's own dead-letter file
/// `own`, or if an earlier redrive's `FILE.rest` holds lines.
pub(crate) fn check_source(path: &Path, own: &Path) -> Result<(), String> {
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

/// The lines a redrive keeps, in `FILE.rest` (made at the first one,
/// owner-only: it holds bodies and tenants).
pub(crate) struct Rest {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    lines: u64,
}

impl Rest {
    /// The rest of a redrive of `path`.
    pub(crate) fn of(path: &Path) -> Rest {
        Rest {
            path: rest_of(path),
            out: None,
            lines: 0,
        }
    }

    /// Keeps `line`.
    pub(crate) fn keep(&mut self, line: &str) -> Result<(), String> {
        let err = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let out = match &mut self.out {
            Some(out) => out,
            None => {
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create(true).truncate(true);
                let file = crate::util::private::open(&options, &self.path).map_err(err)?;
                self.out.insert(BufWriter::new(file))
            }
        };
        let written = out
            .write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"));
        written.map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.lines += 1;
        Ok(())
    }

    /// Writes out and syncs what was kept; how many lines.
    pub(crate) fn close(self) -> Result<u64, String> {
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

/// Where a line goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    /// The destination it came from, open now.
    To(&'a str),
    /// The destination it came from is gone: it stays where it is.
    Gone,
    /// It names none (an older relay's): it stays where it is.
    Unnamed,
}

/// The open destinations lines may go back to, by name and by URL (lines
/// an older relay wrote name the URL): built once for a redrive, so that
/// each line's route is one lookup, not a walk through every destination.
pub(crate) struct Targets {
    by: std::collections::HashMap<String, Arc<str>>,
}

impl Targets {
    /// `targets` (`(name, url)`, in listing order): a URL two share goes
    /// to the first.
    pub(crate) fn new(targets: Vec<(Arc<str>, String)>) -> Targets {
        let mut by = std::collections::HashMap::with_capacity(targets.len() * 2);
        for (name, _) in &targets {
            by.insert(name.to_string(), name.clone());
        }
        for (name, url) in targets {
            by.entry(url).or_insert(name);
        }
        Targets { by }
    }
}

/// The open destination a line goes back to: the one it names (by name,
/// or by URL for lines an older relay wrote), else, for a line that names
/// none, `default` if that is open. Never another destination: a letter
/// from one receiver is not another's to get.
pub(crate) fn route<'a>(named: Option<&str>, targets: &'a Targets) -> Route<'a> {
    let find = |n: &str| targets.by.get(n).map(|name| &**name);
    match named {
        Some(n) => find(n).map_or(Route::Gone, Route::To),
        None => find(crate::config::DEFAULT_NAME).map_or(Route::Unnamed, Route::To),
    }
}

/// A line as the relay writes it, `None` if it does not parse (or its
/// base64 body does not decode).
pub(crate) fn parse(line: &str) -> Option<Letter> {
    let letter: Letter = serde_json::from_str(line).ok()?;
    if let (None, Some(b64)) = (&letter.body, &letter.body_base64) {
        base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    }
    Some(letter)
}

/// The job a line describes, holding its bytes against the budget; `None`
/// when the budget has no room for its body.
pub(crate) fn job_of(letter: Letter, budget: &ByteBudget) -> Option<Job> {
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
    fn lines_go_back_only_where_they_came_from() {
        let two = || -> Vec<(Arc<str>, String)> {
            vec![
                (Arc::from("a"), "http://a/".into()),
                (Arc::from("b"), "http://b/".into()),
            ]
        };
        let targets = Targets::new(two());
        assert_eq!(route(Some("b"), &targets), Route::To("b"));
        assert_eq!(route(Some("http://a/"), &targets), Route::To("a"));
        assert_eq!(route(Some("gone"), &targets), Route::Gone);
        let one = Targets::new(two()[..1].to_vec());
        assert_eq!(
            route(Some("gone"), &one),
            Route::Gone,
            "not to the only one"
        );
        assert_eq!(route(None, &targets), Route::Unnamed);
        let with_default = Targets::new(vec![(Arc::from("default"), "http://d/".into())]);
        assert_eq!(route(None, &with_default), Route::To("default"));
        let shared = Targets::new(vec![
            (Arc::from("first"), "http://same/".into()),
            (Arc::from("second"), "http://same/".into()),
        ]);
        assert_eq!(route(Some("http://same/"), &shared), Route::To("first"));
        assert_eq!(route(Some("second"), &shared), Route::To("second"));
    }
}
