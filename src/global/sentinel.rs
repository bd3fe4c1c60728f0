//! A Redis primary found through Sentinel, and found again when it moves.
//!
//! A `redis+sentinel://` URL names the sentinels and the primary's name.
//! The primary's address is asked of the sentinels (the first that knows
//! it answers, and the primary must say `ROLE` master: the redis crate's
//! [`SentinelClient`]); a connection to it is kept until a command fails in
//! a way that says it may have moved (the connection lost, refused or
//! timed out, or an answer `READONLY` or `MASTERDOWN`), and the next
//! command asks the sentinels again (after `NOREPLICAS` too, keeping the
//! connection unless they name another server). A primary that still answers
//! is also checked against the sentinels' word about once every
//! [`RECHECK`], in the background: a server that came back as a writable
//! primary the sentinels no longer name (before they make it a replica)
//! is left within that, so two relays never grant from two copies of one
//! bucket for long. Only one lookup runs at a time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisConnectionInfo, ServerErrorKind, Value,
};

/// The scheme of a URL that names sentinels.
pub(crate) const SCHEME: &str = "redis+sentinel://";

/// How long asking the sentinels for the primary may take (each sentinel
/// that does not answer costs its connect timeout).
const LOOKUP: Duration = Duration::from_secs(5);

/// How often a primary in use is checked against what the sentinels name.
const RECHECK: Duration = Duration::from_secs(1);

/// What a `redis+sentinel://` URL says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// Each sentinel's `host:port`.
    pub(crate) sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub(crate) service: String,
    /// The primary's database.
    pub(crate) db: i64,
    /// The primary's user and password, if any (percent-decoded).
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    /// The sentinels' own password, if any (percent-decoded).
    pub(crate) sentinel_password: Option<String>,
}

/// `text` with its `%XX` escapes decoded (as a URL's user information and
/// query are written: `@`, `:`, `/`, `?`, `#` and `%` escaped).
fn decoded(text: &str, what: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{what}: a % not followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{what}: not UTF-8 once decoded"))
}

/// Reads `redis+sentinel://[user:password@]host:port[,host:port…]/name[/db]
/// [?sentinel_password=…]`: the user and password are the primary's; the
/// sentinels' own password, if they have one, is the query's. Passwords
/// are percent-encoded as in any URL; an error never repeats them.
pub(crate) fn parse(url: &str) -> Result<SentinelUrl, String> {
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| format!("not a {SCHEME} URL"))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((auth, rest)) => (Some(auth), rest),
        None => (None, rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut path = path.split('/').filter(|p| !p.is_empty());
    let service = path
        .next()
        .ok_or("no primary name: redis+sentinel://host:port/<name>")?
        .to_owned();
    let db = match path.next() {
        Some(db) => db
            .parse::<i64>()
            .map_err(|_| format!("database {db:?} is not a number"))?,
        None => 0,
    };
    if path.next().is_some() {
        return Err("more than /<name>/<db> in the path".into());
    }
    let mut sentinel_password = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sentinel_password", v)) => {
                sentinel_password = Some(decoded(v, "sentinel_password")?);
            }
            _ => {
                let name = pair.split('=').next().unwrap_or_default();
                return Err(format!(
                    "unknown parameter {name:?} (only sentinel_password=…)"
                ));
            }
        }
    }
    let sentinels: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    if sentinels.is_empty() {
        return Err("no sentinel address".into());
    }
    let (username, password) = match auth {
        None => (None, None),
        Some(a) => match a.split_once(':') {
            Some((u, p)) => (
                (!u.is_empty()).then(|| decoded(u, "user")).transpose()?,
                Some(decoded(p, "password")?),
            ),
            None => (Some(decoded(a, "user")?), None),
        },
    };
    Ok(SentinelUrl {
        sentinels,
        service,
        db,
        username,
        password,
        sentinel_password,
    })
}

/// How long a failed lookup answers for itself before the sentinels are
/// asked again (no storm of lookups while a failover is under way).
const RETRY: Duration = Duration::from_millis(200);

/// Timeouts in a row that count as the primary gone (one is a slow
/// command; several, a primary stopped or cut off).
const TIMEOUTS_MOVED: u32 = 3;

/// What is known of the primary.
#[derive(Default)]
struct Known {
    /// The primary in use, its address and generation.
    manager: Option<ConnectionManager>,
    addr: String,
    generation: u64,
    /// The last lookup failed, when and why.
    failed: Option<(tokio::time::Instant, String)>,
    /// A lookup is under way.
    looking: bool,
    /// When the sentinels last named the primary in use.
    named: Option<tokio::time::Instant>,
}

/// A lookup under way: ends it however the task ends (its waiters told).
struct Looking<'a>(&'a Followed);

impl Drop for Looking<'_> {
    fn drop(&mut self) {
        self.0.known().looking = false;
        self.0.looked.notify_waiters();
    }
}

/// The primary the sentinels name, connected to until it may have moved.
pub(crate) struct Followed {
    /// Asks the sentinels (one lookup at a time, in a task of its own so
    /// that no caller's deadline cuts it short).
    client: tokio::sync::Mutex<SentinelClient>,
    known: Mutex<Known>,
    /// A lookup ended.
    looked: tokio::sync::Notify,
    /// Commands that timed out in a row.
    timeouts: AtomicU32,
    config: ConnectionManagerConfig,
    db: i64,
}

impl Followed {
    /// Sentinels as `url` names them; nothing is asked yet.
    pub(crate) fn new(url: &str, config: ConnectionManagerConfig) -> redis::RedisResult<Self> {
        let parsed = parse(url).map_err(|e| {
            redis::RedisError::from((ErrorKind::InvalidClientConfig, "sentinel URL", e))
        })?;
        let mut info = RedisConnectionInfo::default().set_db(parsed.db);
        if let Some(u) = &parsed.username {
            info = info.set_username(u);
        }
        if let Some(p) = &parsed.password {
            info = info.set_password(p);
        }
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        let mut sentinels = Vec::new();
        for host in &parsed.sentinels {
            let mut at = format!("redis://{host}/").into_connection_info()?;
            if let Some(p) = &parsed.sentinel_password {
                at = at.set_redis_settings(RedisConnectionInfo::default().set_password(p));
            }
            sentinels.push(at);
        }
        let client = SentinelClient::build(
            sentinels,
            parsed.service.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Followed {
            client: tokio::sync::Mutex::new(client),
            known: Mutex::default(),
            looked: tokio::sync::Notify::new(),
            timeouts: AtomicU32::new(0),
            config,
            db: parsed.db,
        })
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The primary's connection and its generation, asking the sentinels
    /// if none is known. A lookup that failed less than [`RETRY`] ago
    /// answers for itself.
    pub(crate) async fn primary(self: &Arc<Self>) -> redis::RedisResult<(u64, ConnectionManager)> {
        loop {
            let looked = self.looked.notified();
            tokio::pin!(looked);
            looked.as_mut().enable();
            {
                let mut known = self.known();
                if let Some(m) = &known.manager {
                    let answer = Ok((known.generation, m.clone()));
                    if !known.looking && known.named.is_none_or(|at| at.elapsed() >= RECHECK) {
                        known.looking = true;
                        tokio::spawn(self.clone().look());
                    }
                    return answer;
                }
                if let Some((at, why)) = &known.failed
                    && at.elapsed() < RETRY
                {
                    return Err(redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        format!("no primary known: {why}"),
                    )));
                }
                if !known.looking {
                    known.looking = true;
                    tokio::spawn(self.clone().look());
                }
            }
            looked.await;
        }
    }

    /// One lookup: the primary the sentinels name (the same connection
    /// kept if it is the same server), or why not.
    async fn look(self: Arc<Self>) {
        // Dropped unfinished (its runtime shutting down): not looking any more.
        let _looking = Looking(&self);
        let found = {
            let mut client = self.client.lock().await;
            tokio::time::timeout(LOOKUP, client.async_get_client()).await
        };
        let found = match found {
            Ok(Ok(client)) => {
                let addr = client.get_connection_info().addr().to_string();
                client
                    .get_connection_manager_lazy(self.config.clone())
                    .map(|m| (addr, m))
                    .map_err(|e| e.to_string())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no sentinel named it within {LOOKUP:?}")),
        };
        {
            let mut known = self.known();
            known.looking = false;
            match found {
                Ok((addr, manager)) => {
                    if addr != known.addr || known.manager.is_none() {
                        known.generation += 1;
                        tracing::info!(primary = %addr, generation = known.generation, "redis: the sentinels name the primary");
                        known.manager = Some(manager);
                        known.addr = addr;
                    }
                    // The same server: its connection, kept, reconnects by itself.
                    known.failed = None;
                    known.named = Some(tokio::time::Instant::now());
                }
                Err(why) => {
                    tracing::debug!(error = %why, "redis: no primary named yet");
                    // A check of a primary in use that found no answer
                    // keeps it (the sentinels may be the ones away); its
                    // commands say whether it moved.
                    let now = tokio::time::Instant::now();
                    if known.manager.is_some() {
                        known.named = Some(now);
                    } else {
                        known.failed = Some((now, why));
                    }
                }
            }
        }
        self.looked.notify_waiters();
    }

    /// Forgets generation `generation` of the primary if `error` says it
    /// may have moved, so the next command asks the sentinels again.
    pub(crate) fn judge(&self, generation: u64, error: &redis::RedisError) {
        let moved = match error.is_timeout() {
            true => self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= TIMEOUTS_MOVED,
            false => moved(error),
        };
        if !moved {
            // NOREPLICAS: a primary without a replica in sync
            // (min-replicas-to-write) may be the side a failover left
            // behind, or a primary whose replica is resyncing: its
            // connection stays, and the sentinels are asked at the next
            // command (a server they no longer name is then left), at
            // most once each RETRY while it lasts.
            let mut known = self.known();
            if noreplicas(error) && known.named.is_some_and(|at| at.elapsed() >= RETRY) {
                known.named = None;
            }
            return;
        }
        self.timeouts.store(0, Ordering::Relaxed);
        let mut known = self.known();
        if known.generation == generation && known.manager.is_some() {
            known.manager = None;
            tracing::warn!(error = %error, "redis: the primary may have moved; asking the sentinels again");
        }
    }

    /// A command answered: the timeouts in a row end.
    pub(crate) fn answered(&self) {
        self.timeouts.store(0, Ordering::Relaxed);
    }

    /// The primary's database.
    pub(crate) fn db(&self) -> i64 {
        self.db
    }

    /// Sends `cmd` to the primary.
    pub(crate) async fn command(self: &Arc<Self>, cmd: &Cmd) -> redis::RedisResult<Value> {
        let (generation, mut conn) = self.primary().await?;
        let answer = conn.req_packed_command(cmd).await;
        self.ended(generation, &answer);
        answer
    }

    /// What a command's `answer` says of the primary.
    pub(crate) fn ended<T>(&self, generation: u64, answer: &redis::RedisResult<T>) {
        match answer {
            Ok(_) => self.answered(),
            Err(e) => self.judge(generation, e),
        }
    }

    /// Sends `pipeline`'s commands to the primary.
    pub(crate) async fn commands(
        self: &Arc<Self>,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.primary().await?;
        let answer = conn.req_packed_commands(pipeline, offset, count).await;
        self.ended(generation, &answer);
        answer
    }
}

/// Whether `error` is a primary's NOREPLICAS refusal.
fn noreplicas(e: &redis::RedisError) -> bool {
    says(e, &["NOREPLICAS"])
}

/// Whether `e`'s code is one of `codes`, or its text names one (a
/// script's refusal can arrive wrapped).
fn says(e: &redis::RedisError, codes: &[&str]) -> bool {
    if e.code().is_some_and(|c| codes.contains(&c)) {
        return true;
    }
    let text = e.to_string();
    codes.iter().any(|c| text.contains(c))
}

/// Whether `error` says the primary may be elsewhere now (a timeout alone
/// does not: [`Followed::judge`] counts those in a row).
fn moved(e: &redis::RedisError) -> bool {
    if e.is_timeout() {
        return false;
    }
    let server = matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
    );
    let said = says(e, &["READONLY", "MASTERDOWN"]);
    server || said || e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_names_sentinels_a_primary_and_its_database() {
        let u = parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/hooks").unwrap();
        assert_eq!(u.sentinels, vec!["10.0.0.1:26379", "10.0.0.2:26379"]);
        assert_eq!((u.service.as_str(), u.db), ("hooks", 0));
        assert_eq!(
            (u.username, u.password, u.sentinel_password),
            (None, None, None)
        );
        let u = parse("redis+sentinel://app:s3cret@h:1/hooks/2?sentinel_password=x").unwrap();
        assert_eq!(u.sentinels, vec!["h:1"]);
        assert_eq!(u.db, 2);
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("app"), Some("s3cret"))
        );
        assert_eq!(u.sentinel_password.as_deref(), Some("x"));
        let u = parse("redis+sentinel://:pw@h:1/m").unwrap();
        assert_eq!((u.username, u.password.as_deref()), (None, Some("pw")));
    }

    #[test]
    fn passwords_are_percent_decoded_and_never_repeated_in_an_error() {
        let u = parse("redis+sentinel://:p%40ss%3Fw%25rd@h:1/m?sentinel_password=a%26b").unwrap();
        assert_eq!(u.password.as_deref(), Some("p@ss?w%rd"));
        assert_eq!(u.sentinel_password.as_deref(), Some("a&b"));
        let e = parse("redis+sentinel://h:1/m?sentinal_password=hunter2").unwrap_err();
        assert!(
            e.contains("sentinal_password") && !e.contains("hunter2"),
            "{e}"
        );
        let e = parse("redis+sentinel://:bad%zzpass@h:1/m").unwrap_err();
        assert!(e.contains("two hex digits") && !e.contains("bad"), "{e}");
    }

    #[test]
    fn a_bad_sentinel_url_says_what_is_wrong() {
        for (url, says) in [
            ("redis://h:1/m", "not a redis+sentinel"),
            ("redis+sentinel://h:1", "no primary name"),
            ("redis+sentinel:///m", "no sentinel"),
            ("redis+sentinel://h:1/m/x", "not a number"),
            ("redis+sentinel://h:1/m/0/9", "more than"),
            ("redis+sentinel://h:1/m?foo=1", "unknown parameter"),
        ] {
            let e = parse(url).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn a_lost_connection_or_a_replica_answer_means_the_primary_may_have_moved() {
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(moved(&io));
        let late = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(
            !moved(&late),
            "one slow command is not a move (three in a row are)"
        );
        let readonly = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(moved(&readonly));
        let script = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "script",
            "READONLY You can't write against a read only replica. script: abc".to_owned(),
        ));
        assert!(moved(&script));
        let wrongtype = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "WRONGTYPE",
        ));
        assert!(!moved(&wrongtype));
    }
}
