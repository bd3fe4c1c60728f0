//! The fleet's Redis must keep what it acknowledged: a 202 is answered
//! once a webhook is in Redis, so a Redis that forgets on restart (no
//! append-only file), that fsyncs only when the system likes
//! (`appendfsync no`) or that evicts keys loses webhooks that were
//! accepted. At start the relay reads its settings (`CONFIG GET` on every
//! primary) and refuses to start below what `redis_durability` accepts
//! (unset: `everysec`), naming each setting and what it would lose; it
//! reads them again every minute (and at most every 5 s when `/readyz`
//! asks), and `/readyz` answers 503 while Redis keeps less than at start,
//! saying why. Where Redis refuses `CONFIG`, `redis_durability` must say
//! what it keeps, and is trusted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dripfeed::global::RedisConnection;

use super::redis::persistence::{Durability, PersistenceError, persistence};

use crate::config::value::RedisDurability;

/// How often the settings are read again.
const EVERY: Duration = Duration::from_secs(60);
/// How recent a reading `/readyz` takes as it is.
const FRESH: Duration = Duration::from_secs(5);

/// What the watch knows.
struct Seen {
    /// Why Redis keeps less than accepted now (`None`: enough, or not
    /// known yet).
    short: Option<String>,
    /// When it was last read.
    at: Option<Instant>,
}

/// See the [module](self) docs.
pub(crate) struct Watch {
    conn: RedisConnection,
    wanted: Durability,
    /// Redis refused `CONFIG`: the operator's word is taken.
    trusted: bool,
    seen: Mutex<Seen>,
}

/// The library's level for the setting's.
fn level(d: RedisDurability) -> Durability {
    match d {
        RedisDurability::Always => Durability::Always,
        RedisDurability::Everysec => Durability::Everysec,
        RedisDurability::None => Durability::None,
    }
}

/// Why what was found keeps less than `wanted`, in one line; `None` when
/// every primary keeps enough.
fn judge(found: &[super::redis::persistence::Persistence], wanted: Durability) -> Option<String> {
    let short: Vec<String> = found.iter().filter_map(|p| p.shortfall(wanted)).collect();
    (!short.is_empty()).then(|| short.join(" | "))
}

/// What a failover can lose under these settings, said once at start: a
/// primary found through Sentinel (`url`) whose 202s no replica confirmed
/// (`wait_replicas` 0) can lose the last moments' webhooks when it dies,
/// since Redis replicates after it answers. Returns the warning given.
pub(crate) fn through_failover(url: &str, wait_replicas: u32) -> Option<&'static str> {
    let sentinel = url.trim().starts_with("redis+sentinel://");
    if !sentinel || wait_replicas > 0 {
        return None;
    }
    let why = "a primary Sentinel watches, but no replica confirms a webhook before its 202 \
               (redis_wait_replicas = 0): a failover can lose the webhooks answered 202 just \
               before it, as Redis replicates after it answers; set redis_wait_replicas = 1 (the number \
               of replicas for none through a planned failover too)";
    tracing::warn!("{why}");
    Some(why)
}

impl Watch {
    /// Reads the Redis of `conn` now: an error (a start refused, exit 2)
    /// when it keeps less than `accepted` (unset: everysec) or refuses
    /// `CONFIG` without `accepted`; a Redis that does not answer is read
    /// once it does.
    pub(crate) async fn start(
        conn: RedisConnection,
        accepted: Option<RedisDurability>,
    ) -> Result<Arc<Watch>, String> {
        let wanted = accepted.map_or(Durability::Everysec, level);
        let mut trusted = false;
        let mut short = None;
        match persistence(&conn).await {
            Ok(found) => {
                if let Some(why) = judge(&found, wanted) {
                    let have = found
                        .iter()
                        .map(|p| p.durability())
                        .min()
                        .unwrap_or(Durability::None);
                    return Err(format!(
                        "Redis would lose webhooks answered 202: {why}. Make it keep them \
                         (appendonly yes, appendfsync always or everysec, maxmemory-policy \
                         noeviction: relay/redis.conf), or accept this with --redis-durability {}",
                        have.as_str()
                    ));
                }
            }
            Err(PersistenceError::Refused(e)) => match accepted {
                None => {
                    return Err(format!(
                        "Redis refuses CONFIG GET ({e}), so the relay cannot see whether it \
                         keeps what it acknowledged (a managed Redis?): say what it keeps with \
                         --redis-durability always|everysec|none"
                    ));
                }
                Some(a) => {
                    tracing::warn!(error = %e, accepted = level(a).as_str(), "Redis refuses CONFIG GET: its durability is not checked; --redis-durability is trusted");
                    trusted = true;
                }
            },
            Err(PersistenceError::Unreachable(e)) => {
                tracing::warn!(error = %e, "Redis did not answer: its durability is checked once it does");
                short = None;
            }
        }
        Ok(Arc::new(Watch {
            conn,
            wanted,
            trusted,
            seen: Mutex::new(Seen { short, at: None }),
        }))
    }

    /// Reads the settings every minute until the process ends.
    pub(crate) fn spawn(self: &Arc<Self>) {
        if self.trusted {
            return;
        }
        let watch = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            loop {
                tick.tick().await;
                watch.read().await;
            }
        });
    }

    /// Why Redis keeps less than accepted now (read again if the last
    /// reading is older than 5 s), for `/readyz`.
    pub(crate) async fn short(&self) -> Option<String> {
        let stale = {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.at.is_none_or(|at| at.elapsed() >= FRESH)
        };
        if stale && !self.trusted {
            self.read().await;
        }
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.short.clone()
    }

    /// One reading; a change is logged.
    async fn read(&self) {
        let short = match persistence(&self.conn).await {
            Ok(found) => judge(&found, self.wanted),
            Err(PersistenceError::Refused(e)) => Some(format!(
                "Redis now refuses CONFIG GET ({e}): its durability cannot be seen"
            )),
            // Not answering is /readyz's `redis` reason already.
            Err(PersistenceError::Unreachable(_)) => return,
        };
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.at = Some(Instant::now());
        if seen.short != short {
            match &short {
                Some(why) => tracing::error!(
                    why = %why,
                    "the fleet's Redis keeps less than it did at start: webhooks answered 202 could be lost; /readyz answers 503"
                ),
                None => tracing::info!("the fleet's Redis keeps what it acknowledged again"),
            }
        }
        seen.short = short;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_primary_without_confirming_replicas_is_warned_of() {
        let watched = "redis+sentinel://a:26379,b:26379/hooks";
        assert!(
            through_failover(watched, 0).is_some_and(|w| w.contains("redis_wait_replicas = 1"))
        );
        assert_eq!(through_failover(watched, 1), None);
        assert_eq!(
            through_failover("redis://a:6379/", 0),
            None,
            "no failover to follow"
        );
    }
}
