//! Where a value came from, and what is wrong with one.

use std::fmt;
use std::path::PathBuf;

/// The source a setting's value was taken from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The built-in default.
    Default,
    /// A file: the `--config` file or a `--destinations` file, and the
    /// line when it is known.
    File {
        /// The file as named.
        path: PathBuf,
        /// Its line, from 1.
        line: Option<usize>,
    },
    /// An environment variable, by name.
    Env(String),
    /// The command line: the flag as written.
    Flag(String),
    /// The admin API (`PUT /v1/destinations/{name}`), kept in this
    /// registry (shared: each destination made there names it).
    Api(std::sync::Arc<std::path::Path>),
    /// The admin API of a relay of the fleet (`queue = redis`), kept in
    /// Redis under this key.
    Fleet(std::sync::Arc<str>),
}

/// The name of the fleet's map of the destinations its admin API made.
pub(crate) const FLEET_MAP: &str = "webhook_relay:destinations";

impl Origin {
    /// The origin a destination made through the fleet's admin API has:
    /// the fleet's map in Redis.
    pub(crate) fn fleet_map() -> Origin {
        Origin::Fleet(format!("dripfeed:map:{{{FLEET_MAP}}}").into())
    }

    /// A file position from a byte offset into its text.
    pub(crate) fn at(path: &std::path::Path, text: &str, offset: usize) -> Origin {
        let line = text
            .get(..offset.min(text.len()))
            .map_or(1, |before| before.matches('\n').count() + 1);
        Origin::File {
            path: path.to_owned(),
            line: Some(line),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File {
                path,
                line: Some(line),
            } => write!(f, "file {}:{line}", path.display()),
            Origin::File { path, line: None } => write!(f, "file {}", path.display()),
            Origin::Env(var) => write!(f, "environment {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Api(path) => write!(f, "admin API (registry {})", path.display()),
            Origin::Fleet(key) => write!(f, "admin API (the fleet's, in Redis {key})"),
        }
    }
}

/// One thing wrong with the configuration: the key it concerns (`drain_rate`,
/// `destinations[2].url`, `DRIPFEED_DRAIN_RAET`), where the value came from,
/// and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// The key, in the file's spelling.
    pub key: String,
    /// Where the offending value was given, if anywhere.
    pub origin: Option<Origin>,
    /// What is wrong, in lower case.
    pub message: String,
}

impl ConfigError {
    /// An error about `key` given at `origin`.
    pub(crate) fn new(
        key: impl Into<String>,
        origin: Option<Origin>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            key: key.into(),
            origin,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(Origin::File {
                path,
                line: Some(line),
            }) => write!(
                f,
                "{}:{line}: {}: {}",
                path.display(),
                self.key,
                self.message
            ),
            Some(Origin::File { path, line: None }) => {
                write!(f, "{}: {}: {}", path.display(), self.key, self.message)
            }
            Some(Origin::Env(var)) if *var == self.key => {
                write!(f, "environment {var}: {}", self.message)
            }
            Some(Origin::Env(var)) => {
                write!(f, "environment {var}: {}: {}", self.key, self.message)
            }
            Some(Origin::Flag(flag)) => write!(f, "{flag}: {}", self.message),
            Some(Origin::Api(path)) => {
                write!(
                    f,
                    "{} (admin API): {}: {}",
                    path.display(),
                    self.key,
                    self.message
                )
            }
            Some(Origin::Fleet(key)) => {
                write!(
                    f,
                    "{key} in Redis (admin API): {}: {}",
                    self.key, self.message
                )
            }
            Some(Origin::Default) | None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

/// Every error found, in the order found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// The known name closest to `word` by edit distance, if it is close.
pub(super) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (distance(word, k), k))
        .filter(|(d, k)| *d <= (k.len() / 4).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over bytes.
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_suggestions() {
        let text = "a = 1\nb = 2\n";
        let o = Origin::at(std::path::Path::new("r.toml"), text, 6);
        assert_eq!(o.to_string(), "file r.toml:2");
        assert_eq!(
            closest("drain_rae", ["drain_rate", "listen"]),
            Some("drain_rate")
        );
        assert_eq!(closest("zzz", ["drain_rate"]), None);
    }
}
