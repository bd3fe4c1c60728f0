//! What a Redis keeps through a restart: its append-only file, how often
//! it is fsynced, and whether it evicts keys under memory pressure — read
//! with `CONFIG GET` from the server (or from every primary of a cluster),
//! judged by [`Persistence::shortfall`]. A shared queue on a Redis that
//! forgets loses jobs its callers were told were accepted.

use std::fmt;

use dripfeed::global::{RedisConnection, RedisError};
use redis::Value;

/// How much a Redis keeps of what it acknowledged, least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Durability {
    /// Nothing promised: no append-only file, an fsync left to the system
    /// (`appendfsync no`), or keys evicted when memory runs out.
    None,
    /// The append-only file fsynced every second: a power loss may lose
    /// the last second.
    Everysec,
    /// Every write fsynced before it is acknowledged.
    Always,
}

impl Durability {
    /// `always`, `everysec` or `none`.
    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> Option<Durability> {
        match text {
            "always" => Some(Durability::Always),
            "everysec" => Some(Durability::Everysec),
            "none" => Some(Durability::None),
            _ => None,
        }
    }

    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::Everysec => "everysec",
            Durability::Always => "always",
        }
    }
}

/// One server's persistence settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Persistence {
    /// The server (`host:port`, or `redis` for a single server).
    pub node: String,
    /// `appendonly`: whether it keeps an append-only file.
    pub appendonly: bool,
    /// `appendfsync`: `always`, `everysec` or `no`.
    pub appendfsync: String,
    /// `maxmemory-policy`: `noeviction` never drops a key.
    pub maxmemory_policy: String,
}

impl Persistence {
    /// What it keeps.
    pub(crate) fn durability(&self) -> Durability {
        if !self.appendonly || self.maxmemory_policy != "noeviction" {
            return Durability::None;
        }
        match self.appendfsync.as_str() {
            "always" => Durability::Always,
            "everysec" => Durability::Everysec,
            _ => Durability::None,
        }
    }

    /// Why it keeps less than `wanted`, naming each setting and what it
    /// would lose; `None` when it keeps enough.
    pub(crate) fn shortfall(&self, wanted: Durability) -> Option<String> {
        if self.durability() >= wanted {
            return None;
        }
        let mut why = Vec::new();
        if !self.appendonly {
            why.push(
                "appendonly no: a restart loses everything since the last snapshot".to_owned(),
            );
        }
        if self.maxmemory_policy != "noeviction" {
            why.push(format!(
                "maxmemory-policy {}: keys are dropped when memory runs out",
                self.maxmemory_policy
            ));
        }
        if self.appendonly {
            match (self.appendfsync.as_str(), wanted) {
                ("no", _) => why.push(
                    "appendfsync no: a power loss loses what the system had not written (tens of seconds)"
                        .to_owned(),
                ),
                ("everysec", Durability::Always) => why.push(
                    "appendfsync everysec: a power loss loses up to the last second".to_owned(),
                ),
                _ => {}
            }
        }
        Some(format!("{}: {}", self.node, why.join("; ")))
    }
}

/// Why the settings could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PersistenceError {
    /// Redis answered with a refusal (a managed Redis without `CONFIG`, an
    /// ACL without it): its text.
    Refused(String),
    /// Redis did not answer.
    Unreachable(RedisError),
}

impl fmt::Display for PersistenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistenceError::Refused(e) => write!(f, "CONFIG GET refused: {e}"),
            PersistenceError::Unreachable(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PersistenceError {}

fn classify(e: redis::RedisError) -> PersistenceError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        PersistenceError::Unreachable(RedisError::from(e))
    } else {
        PersistenceError::Refused(e.to_string())
    }
}

/// A value Redis sent as text.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The value of a `CONFIG GET` answer (a map, or an array of pairs).
fn config_value(v: &Value) -> Option<String> {
    match v {
        Value::Map(pairs) => pairs.first().and_then(|(_, v)| text(v)),
        Value::Array(items) => items.get(1).and_then(text),
        _ => None,
    }
}

/// The persistence settings of the server, or of every primary of a
/// cluster; one round trip per setting (three), each bounded.
pub(crate) async fn persistence(
    conn: &RedisConnection,
) -> Result<Vec<Persistence>, PersistenceError> {
    let mut found: Vec<Persistence> = Vec::new();
    for param in ["appendonly", "appendfsync", "maxmemory-policy"] {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(param);
        let answers = conn
            .on_every_primary(cmd, std::time::Duration::from_secs(2))
            .await
            .map_err(classify)?;
        for (node, value) in answers {
            let value = config_value(&value).ok_or_else(|| {
                PersistenceError::Unreachable(RedisError::unexpected("CONFIG GET"))
            })?;
            let at = match found.iter().position(|p| p.node == node) {
                Some(at) => at,
                None => {
                    found.push(Persistence {
                        node,
                        appendonly: false,
                        appendfsync: String::new(),
                        maxmemory_policy: String::new(),
                    });
                    found.len() - 1
                }
            };
            let p = &mut found[at];
            match param {
                "appendonly" => p.appendonly = value == "yes",
                "appendfsync" => p.appendfsync = value,
                _ => p.maxmemory_policy = value,
            }
        }
    }
    Ok(found)
}
