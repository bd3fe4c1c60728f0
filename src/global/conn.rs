//! One handle to Redis, a single server, a primary Sentinel watches, or a
//! cluster, that reconnects in the background and counts its round trips.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::sentinel::{self, Followed};

/// How long one command may take before it counts as a failure.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(250);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);

/// A Redis connection shared by the fleet-scope types: cheap to clone, safe
/// to use from many tasks, reconnecting in the background after a failure.
///
/// [`RedisConnection::open`] connects lazily to one server (a failure shows
/// up in the first command, not here); [`RedisConnection::cluster`] connects
/// to a Redis Cluster. Every command counts one round trip in
/// [`round_trips`](Self::round_trips), shared by all clones.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use dripfeed::global::RedisConnection;
/// // Lazy: nothing is sent until the first command.
/// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
/// assert_eq!(conn.round_trips(), 0);
/// assert!(RedisConnection::open("not a url").is_err());
/// # }
/// ```
#[derive(Clone)]
pub struct RedisConnection {
    pub(super) link: Link,
    trips: Arc<AtomicU64>,
    /// `dripfeed_redis_round_trips_total{purpose}`, when counted by purpose.
    purpose: Option<metrics::Counter>,
}

#[derive(Clone)]
pub(super) enum Link {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<Followed>),
    /// One primary the sentinels named, and its generation.
    Pinned(Arc<Followed>, u64, ConnectionManager),
}

impl RedisConnection {
    /// A lazily connected handle to one Redis server at `url`
    /// (`redis://host:port/db`), reconnecting in the background with short
    /// timeouts (250 ms per command and per connection attempt). Must be
    /// called within a tokio runtime.
    ///
    /// A `redis+sentinel://[user:password@]host:port[,host:port…]/name[/db]
    /// [?sentinel_password=…]` URL names Redis Sentinels and the primary
    /// they watch under `name` (the user and password are the primary's):
    /// the primary is asked of the sentinels at the first command and
    /// again whenever a command says it may have moved (the connection
    /// lost, refused or timed out, `READONLY` or `MASTERDOWN`), so every
    /// type built on this handle follows a failover. A command that fails
    /// so fails; the next one goes to the primary the sentinels name then.
    /// Sentinel and Cluster are either-or: a cluster does its own failover.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::RedisConnection;
    /// assert!(RedisConnection::open("redis://127.0.0.1:6379/").is_ok());
    /// let watched = "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/hooks";
    /// assert!(RedisConnection::open(watched).is_ok());
    /// let nameless = RedisConnection::open("redis+sentinel://10.0.0.1:26379").unwrap_err();
    /// assert!(nameless.to_string().contains("no primary name"), "{nameless}");
    /// # }
    /// ```
    pub fn open(url: &str) -> Result<Self, RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT));
        if url.starts_with(sentinel::SCHEME) {
            let followed = Followed::new(url, config).map_err(RedisError::from)?;
            return Ok(Self::from_link(Link::Sentinel(Arc::new(followed))));
        }
        let client = redis::Client::open(url).map_err(RedisError::from)?;
        let manager = client
            .get_connection_manager_lazy(config)
            .map_err(RedisError::from)?;
        Ok(Self::from_link(Link::Single(manager)))
    }

    /// A handle to the Redis Cluster reachable through any of `nodes`
    /// (`redis://host:port`); connects now and fails if no node answers.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), dripfeed::global::RedisError> {
    /// use dripfeed::global::RedisConnection;
    /// let conn = RedisConnection::cluster(&["redis://127.0.0.1:7000"]).await?;
    /// assert_eq!(conn.round_trips(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cluster(nodes: &[&str]) -> Result<Self, RedisError> {
        let client = ClusterClientBuilder::new(nodes.iter().copied())
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(2)
            .build()
            .map_err(RedisError::from)?;
        let conn = client
            .get_async_connection()
            .await
            .map_err(RedisError::from)?;
        Ok(Self::from_link(Link::Cluster(conn)))
    }

    fn from_link(link: Link) -> Self {
        Self {
            link,
            trips: Arc::new(AtomicU64::new(0)),
            purpose: None,
        }
    }

    /// A clone (sharing [`round_trips`](Self::round_trips)) whose round
    /// trips are also counted in the counter
    /// `dripfeed_redis_round_trips_total{purpose}`, so an operator sees what
    /// each webhook costs in Redis by what it was for (admission, claims,
    /// acknowledgements, permits, quotas…). Call it once the metrics
    /// recorder is installed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::RedisConnection;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let admit = conn.counted_as("queue_admit");
    /// assert_eq!(admit.round_trips(), conn.round_trips());
    /// # }
    /// ```
    pub fn counted_as(&self, purpose: &'static str) -> Self {
        Self {
            link: self.link.clone(),
            trips: self.trips.clone(),
            purpose: Some(metrics::counter!(
                crate::metrics::REDIS_ROUND_TRIPS,
                "purpose" => purpose
            )),
        }
    }

    fn count_trip(&self) {
        self.trips.fetch_add(1, Ordering::Relaxed);
        if let Some(c) = &self.purpose {
            c.increment(1);
        }
    }

    /// Commands (and pipelines) sent so far through this handle and its
    /// clones: the Redis round trips.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use dripfeed::global::RedisConnection;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// assert_eq!(conn.clone().round_trips(), 0);
    /// # }
    /// ```
    pub fn round_trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }

    /// A clone with its own round-trip count, starting at zero.
    pub(crate) fn with_own_count(&self) -> Self {
        Self {
            trips: Arc::new(AtomicU64::new(0)),
            ..self.clone()
        }
    }

    /// A clone that keeps to the server it reaches now: with a
    /// `redis+sentinel://` URL, the primary the sentinels name now (asked
    /// if none is known), even once another is named; otherwise the same
    /// handle. For commands that must reach one server, such as a write
    /// and the `WAIT` for its replicas: after a failover the pinned
    /// handle's commands fail rather than reach the new primary.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::RedisConnection;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let pinned = conn.pinned().await.unwrap();
    /// assert_eq!(pinned.round_trips(), conn.round_trips());
    /// // No sentinel answers: no primary to pin.
    /// let watched = RedisConnection::open("redis+sentinel://127.0.0.1:1/hooks").unwrap();
    /// assert!(watched.pinned().await.is_err());
    /// # }
    /// ```
    pub async fn pinned(&self) -> Result<Self, RedisError> {
        let Link::Sentinel(f) = &self.link else {
            return Ok(self.clone());
        };
        let (generation, manager) = f.primary().await.map_err(RedisError::from)?;
        Ok(Self {
            link: Link::Pinned(f.clone(), generation, manager),
            ..self.clone()
        })
    }

    /// `counted`'s round-trip counts over this handle's connection: a
    /// [`pinned`](Self::pinned) handle's server, counted under another
    /// purpose.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::RedisConnection;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let other = RedisConnection::open("redis://127.0.0.1:2/").unwrap();
    /// let both = conn.counted_like(&other);
    /// assert_eq!(both.round_trips(), other.round_trips());
    /// # }
    /// ```
    pub fn counted_like(&self, counted: &RedisConnection) -> Self {
        Self {
            link: self.link.clone(),
            trips: counted.trips.clone(),
            purpose: counted.purpose.clone(),
        }
    }

    /// Whether this handle talks to a cluster.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use dripfeed::global::RedisConnection;
    /// assert!(!RedisConnection::open("redis://127.0.0.1:1/").unwrap().is_cluster());
    /// # }
    /// ```
    pub fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// `cmd`'s answer from the server (named `redis`), or from each
    /// primary of a cluster (named by its address), within `limit`: for
    /// what every node must be asked (`CONFIG GET`, `INFO`). A late answer
    /// is a timeout error (`is_timeout`).
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::global::RedisConnection;
    /// use std::time::Duration;
    /// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
    /// let mut cmd = redis::cmd("CONFIG");
    /// cmd.arg("GET").arg("appendonly");
    /// let answers = conn.on_every_primary(cmd, Duration::from_secs(2)).await?;
    /// assert_eq!(answers[0].0, "redis");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn on_every_primary(
        &self,
        cmd: redis::Cmd,
        limit: Duration,
    ) -> Result<Vec<(String, Value)>, redis::RedisError> {
        let late = || {
            redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "redis command timed out",
            ))
        };
        let answer = match &self.link {
            Link::Single(_) | Link::Sentinel(_) | Link::Pinned(..) => {
                let mut conn = self.clone();
                let v = tokio::time::timeout(limit, cmd.query_async::<Value>(&mut conn))
                    .await
                    .map_err(|_| late())??;
                return Ok(vec![("redis".to_owned(), v)]);
            }
            Link::Cluster(cluster) => {
                let mut conn = cluster.clone();
                let route = redis::cluster_routing::RoutingInfo::MultiNode((
                    redis::cluster_routing::MultipleNodeRoutingInfo::AllMasters,
                    None,
                ));
                tokio::time::timeout(limit, conn.route_command(cmd, route))
                    .await
                    .map_err(|_| late())??
            }
        };
        Ok(match answer {
            Value::Map(pairs) => pairs
                .into_iter()
                .map(|(node, v)| (text(&node).unwrap_or_default(), v))
                .collect(),
            other => vec![("cluster".to_owned(), other)],
        })
    }
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConnection")
            .field("cluster", &self.is_cluster())
            .field("round_trips", &self.round_trips())
            .finish()
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.count_trip();
        match &mut self.link {
            Link::Single(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
            Link::Sentinel(f) => {
                let f = f.clone();
                Box::pin(async move { f.command(cmd).await })
            }
            Link::Pinned(f, generation, c) => {
                let (f, generation, mut c) = (f.clone(), *generation, c.clone());
                Box::pin(async move {
                    let answer = c.req_packed_command(cmd).await;
                    f.ended(generation, &answer);
                    answer
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.count_trip();
        match &mut self.link {
            Link::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(f) => {
                let f = f.clone();
                Box::pin(async move { f.commands(pipeline, offset, count).await })
            }
            Link::Pinned(f, generation, c) => {
                let (f, generation, mut c) = (f.clone(), *generation, c.clone());
                Box::pin(async move {
                    let answer = c.req_packed_commands(pipeline, offset, count).await;
                    f.ended(generation, &answer);
                    answer
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Single(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
            Link::Sentinel(f) | Link::Pinned(f, ..) => f.db(),
        }
    }
}

/// A Redis failure: connecting, a command, or an answer that did not have
/// the expected shape.
///
/// ```
/// use dripfeed::global::RedisError;
/// let err = RedisError::unexpected("no debt");
/// assert_eq!(err.to_string(), "unexpected redis answer: no debt");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisError {
    message: String,
    /// Sent, and no answer came: Redis may have run it.
    unanswered: bool,
}

impl RedisError {
    /// An answer Redis gave that dripfeed did not expect.
    ///
    /// ```
    /// # use dripfeed::global::RedisError;
    /// assert!(RedisError::unexpected("x").to_string().contains('x'));
    /// ```
    pub fn unexpected(what: &str) -> Self {
        Self {
            message: format!("unexpected redis answer: {what}"),
            unanswered: false,
        }
    }

    /// A command that did not answer in time.
    ///
    /// ```
    /// # use dripfeed::global::RedisError;
    /// assert_eq!(RedisError::timeout().to_string(), "redis command timed out");
    /// ```
    pub fn timeout() -> Self {
        Self {
            message: "redis command timed out".to_owned(),
            unanswered: true,
        }
    }

    /// Whether Redis may have run the command all the same: it was sent
    /// (or may have been) and no answer came, as when it timed out or the
    /// connection dropped while waiting. A write that failed so may have
    /// been made: only reading it back tells. A refused connection or an
    /// error answer did not run it.
    ///
    /// ```
    /// # use dripfeed::global::RedisError;
    /// assert!(RedisError::timeout().may_have_run());
    /// assert!(!RedisError::unexpected("no debt").may_have_run());
    /// ```
    pub fn may_have_run(&self) -> bool {
        self.unanswered
    }
}

impl From<redis::RedisError> for RedisError {
    fn from(e: redis::RedisError) -> Self {
        Self {
            message: format!("redis: {e}"),
            unanswered: e.is_timeout() || (e.is_io_error() && !e.is_connection_refusal()),
        }
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RedisError {}

/// Parses a number Redis sent as a string or an integer.
pub(crate) fn number(v: &Value, what: &str) -> Result<f64, RedisError> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| RedisError::unexpected(what)),
        Value::SimpleString(s) => s.parse().map_err(|_| RedisError::unexpected(what)),
        Value::Double(d) => Ok(*d),
        _ => Err(RedisError::unexpected(what)),
    }
}

/// The array a script returned, at least `len` long.
pub(crate) fn array(v: Value, len: usize, what: &str) -> Result<Vec<Value>, RedisError> {
    match v {
        Value::Array(items) if items.len() >= len => Ok(items),
        _ => Err(RedisError::unexpected(what)),
    }
}

/// How long one call may take.
pub(crate) const CALL: Duration = Duration::from_secs(2);

/// A value Redis sent as bytes.
pub(crate) fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// A value Redis sent as text.
pub(crate) fn text(v: &Value) -> Option<String> {
    String::from_utf8(bytes(v)?).ok()
}

/// A count Redis sent as an integer or as text.
pub(crate) fn count(v: &Value) -> Result<u64, RedisError> {
    match v {
        Value::Int(i) => u64::try_from(*i).map_err(|_| RedisError::unexpected("negative count")),
        other => text(other)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| RedisError::unexpected("a count")),
    }
}

/// Runs `fut` with a deadline; a late answer is a failure.
pub(crate) async fn bounded<T>(
    fut: impl Future<Output = Result<T, redis::RedisError>>,
    limit: Duration,
) -> Result<T, RedisError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(RedisError::from),
        Err(_) => Err(RedisError::timeout()),
    }
}
