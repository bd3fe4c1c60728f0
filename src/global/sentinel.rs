//! A Redis primary found through Sentinel, and found again when it moves.
//!
//! A `redis+sentinel://` URL names the sentinels and the primary's name.
//! The primary's address is asked of the sentinels (the first that knows
//! it answers, and the primary must say `ROLE` master: the redis crate's
//! [`SentinelClient`]); a connection to it is kept until a command fails in
//! a way that says it may have moved (the connection lost, refused or
//! timed out, or an answer `READONLY` or `MASTERDOWN`), and the next
//! command asks the sentinels again. Only one lookup runs at a time.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Cmd, ErrorKind, Pipeline, RedisConnectionInfo, ServerErrorKind, Value};

/// The scheme of a URL that names sentinels.
pub(crate) const SCHEME: &str = "redis+sentinel://";

/// How long asking the sentinels for the primary may take.
const LOOKUP: Duration = Duration::from_secs(2);

/// What a `redis+sentinel://` URL says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// Each sentinel's `redis://` URL.
    pub(crate) sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub(crate) service: String,
    /// The primary's database.
    pub(crate) db: i64,
    /// The primary's user and password, if any.
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

/// Reads `redis+sentinel://[user:password@]host:port[,host:port…]/name[/db]
/// [?sentinel_password=…]`: the user and password are the primary's; the
/// sentinels' own password, if they have one, is the query's.
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
            Some(("sentinel_password", v)) => sentinel_password = Some(v.to_owned()),
            _ => return Err(format!("unknown parameter {pair:?} (sentinel_password=…)")),
        }
    }
    let sentinels: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| match &sentinel_password {
            Some(p) => format!("redis://:{p}@{h}/"),
            None => format!("redis://{h}/"),
        })
        .collect();
    if sentinels.is_empty() {
        return Err("no sentinel address".into());
    }
    let (username, password) = match auth {
        None => (None, None),
        Some(a) => match a.split_once(':') {
            Some((u, p)) => ((!u.is_empty()).then(|| u.to_owned()), Some(p.to_owned())),
            None => (Some(a.to_owned()), None),
        },
    };
    Ok(SentinelUrl {
        sentinels,
        service,
        db,
        username,
        password,
    })
}

/// The primary the sentinels name, connected to until it may have moved.
pub(crate) struct Followed {
    /// Asks the sentinels (one lookup at a time).
    client: tokio::sync::Mutex<SentinelClient>,
    /// The primary in use and its generation, if one is known.
    current: Mutex<(u64, Option<ConnectionManager>)>,
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
        let client = SentinelClient::build(
            parsed.sentinels.iter().map(String::as_str).collect(),
            parsed.service.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Followed {
            client: tokio::sync::Mutex::new(client),
            current: Mutex::new((0, None)),
            config,
            db: parsed.db,
        })
    }

    fn current(&self) -> std::sync::MutexGuard<'_, (u64, Option<ConnectionManager>)> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The primary's connection and its generation, asking the sentinels
    /// if none is known.
    pub(crate) async fn primary(&self) -> redis::RedisResult<(u64, ConnectionManager)> {
        if let (generation, Some(m)) = &*self.current() {
            return Ok((*generation, m.clone()));
        }
        let mut client = self.client.lock().await;
        // Another caller may have found it while this one waited.
        if let (generation, Some(m)) = &*self.current() {
            return Ok((*generation, m.clone()));
        }
        let found = tokio::time::timeout(LOOKUP, client.async_get_client())
            .await
            .map_err(|_| {
                redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no sentinel named the primary in time",
                ))
            })??;
        let manager = found.get_connection_manager_lazy(self.config.clone())?;
        let mut current = self.current();
        current.0 += 1;
        current.1 = Some(manager.clone());
        tracing::info!(
            generation = current.0,
            "redis: the sentinels name the primary"
        );
        Ok((current.0, manager))
    }

    /// Forgets generation `generation` of the primary if `error` says it
    /// may have moved, so the next command asks the sentinels again.
    pub(crate) fn judge(&self, generation: u64, error: &redis::RedisError) {
        if !moved(error) {
            return;
        }
        let mut current = self.current();
        if current.0 == generation && current.1.is_some() {
            current.1 = None;
            tracing::warn!(error = %error, "redis: the primary may have moved; asking the sentinels again");
        }
    }

    /// The primary's database.
    pub(crate) fn db(&self) -> i64 {
        self.db
    }

    /// Sends `cmd` to the primary.
    pub(crate) async fn command(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
        let (generation, mut conn) = self.primary().await?;
        let answer = conn.req_packed_command(cmd).await;
        if let Err(e) = &answer {
            self.judge(generation, e);
        }
        answer
    }

    /// Sends `pipeline`'s commands to the primary.
    pub(crate) async fn commands(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.primary().await?;
        let answer = conn.req_packed_commands(pipeline, offset, count).await;
        if let Err(e) = &answer {
            self.judge(generation, e);
        }
        answer
    }
}

/// Whether `error` says the primary may be elsewhere now.
fn moved(e: &redis::RedisError) -> bool {
    let server = matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
    );
    // A script's write refused on a replica can arrive wrapped.
    let said = e
        .code()
        .is_some_and(|c| c == "READONLY" || c == "MASTERDOWN")
        || e.to_string().contains("READONLY")
        || e.to_string().contains("MASTERDOWN");
    server
        || said
        || e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_timeout()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_names_sentinels_a_primary_and_its_database() {
        let u = parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/hooks").unwrap();
        assert_eq!(
            u.sentinels,
            vec!["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"]
        );
        assert_eq!((u.service.as_str(), u.db), ("hooks", 0));
        assert_eq!((u.username, u.password), (None, None));
        let u = parse("redis+sentinel://app:s3cret@h:1/hooks/2?sentinel_password=x").unwrap();
        assert_eq!(u.sentinels, vec!["redis://:x@h:1/"]);
        assert_eq!(u.db, 2);
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("app"), Some("s3cret"))
        );
        let u = parse("redis+sentinel://:pw@h:1/m").unwrap();
        assert_eq!((u.username, u.password.as_deref()), (None, Some("pw")));
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
