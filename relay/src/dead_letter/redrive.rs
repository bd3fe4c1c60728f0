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

/// The open destinations lines may go back to: by name, one lookup in
/// the catalog; by URL (lines an older relay wrote name the URL), in a map
/// of every open destination's URL built the first time a line needs it.
/// A redrive never walks every destination for each line.
pub(crate) struct Targets<'c> {
    catalog: &'c crate::catalog::Catalog,
    by_url: std::sync::OnceLock<std::collections::HashMap<String, Arc<str>>>,
}

impl<'c> Targets<'c> {
    /// `catalog`'s open destinations.
    pub(crate) fn new(catalog: &'c crate::catalog::Catalog) -> Targets<'c> {
        Targets {
            catalog,
            by_url: std::sync::OnceLock::new(),
        }
    }

    /// The open destination whose URL is `url` (the first in listing
    /// order when several share it).
    fn by_url(&self, url: &str) -> Option<&str> {
        let map = self.by_url.get_or_init(|| {
            let mut map = std::collections::HashMap::new();
            for (name, url) in self.catalog.targets() {
                map.entry(url).or_insert(name);
            }
            map
        });
        map.get(url).map(|name| &**name)
    }
}

/// The open destination a line goes back to: the one it names (by name,
/// or by URL for lines an older relay wrote), else, for a line that names
/// none, `default` if that is open. Never another destination: a letter
/// from one receiver is not another's to get.
pub(crate) fn route<'a>(named: Option<&'a str>, targets: &'a Targets<'_>) -> Route<'a> {
    let default = crate::config::DEFAULT_NAME;
    match named {
        Some(n) if targets.catalog.is_open(n) => Route::To(n),
        // A name holds no "://": a URL, written by an older relay.
        Some(n) if n.contains("://") => targets.by_url(n).map_or(Route::Gone, Route::To),
        Some(_) => Route::Gone,
        None if targets.catalog.is_open(default) => Route::To(default),
        None => Route::Unnamed,
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
        use crate::catalog::Catalog;
        use crate::config::{Fields, Origin};
        let dest = |name: &str, url: &str| {
            let fields = Fields {
                name: Some(name.into()),
                url: Some(url.into()),
                ..Fields::default()
            };
            fields
                .check("d", &Origin::Default, &mut Vec::new())
                .unwrap()
        };
        let two = Catalog::new(&[dest("a", "http://a/"), dest("b", "http://b/")]);
        let targets = Targets::new(&two);
        assert_eq!(route(Some("b"), &targets), Route::To("b"));
        assert_eq!(route(Some("http://a/"), &targets), Route::To("a"));
        assert_eq!(route(Some("gone"), &targets), Route::Gone);
        assert_eq!(route(Some("http://gone/"), &targets), Route::Gone);
        assert_eq!(route(None, &targets), Route::Unnamed);
        let one = Catalog::new(&[dest("a", "http://a/")]);
        assert_eq!(
            route(Some("gone"), &Targets::new(&one)),
            Route::Gone,
            "not to the only one"
        );
        let with_default = Catalog::new(&[dest("default", "http://d/")]);
        assert_eq!(
            route(None, &Targets::new(&with_default)),
            Route::To("default")
        );
        let shared = Catalog::new(&[
            dest("first", "http://same/"),
            dest("second", "http://same/"),
        ]);
        let shared = Targets::new(&shared);
        assert_eq!(route(Some("http://same/"), &shared), Route::To("first"));
        assert_eq!(route(Some("second"), &shared), Route::To("second"));
        two.close("b");
        assert_eq!(route(Some("b"), &targets), Route::Gone, "closed: not open");
    }
}
