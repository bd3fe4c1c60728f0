//! Rules over the merged settings: ranges, settings that go together, what
//! this build can do. Each error names the key and where its value came
//! from; every rule runs, so all errors are reported at once.

use super::error::{ConfigError, Origin};
use super::value::{FailureMode, QueueKind};
use super::{Config, Settings};

/// The longest duration a setting takes: a century.
const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);

/// The most destinations `/metrics` names as the busiest: a bounded top-K.
const MAX_BUSIEST: usize = 1000;

/// The most connections a listener serves at once (each also needs a file
/// descriptor).
const MAX_CONNECTIONS: usize = 1 << 24;

/// Every rule broken by `cfg`.
pub(super) fn check(cfg: &Config, errors: &mut Vec<ConfigError>) {
    let s = &cfg.settings;
    let mut bad = |key: &'static str, message: String| {
        errors.push(ConfigError::new(key, cfg.origin(key).cloned(), message));
    };
    for (key, value) in [
        ("drain_rate", Some(s.drain_rate)),
        ("floor", Some(s.floor)),
        ("ceiling", Some(s.ceiling)),
        ("tenant_rate", s.tenant_rate),
        ("tenant_burst", Some(s.tenant_burst)),
        ("global_rate", s.global_rate),
        ("receiver_capacity", Some(s.receiver_capacity)),
    ] {
        if value.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            bad(key, "must be a number above 0".into());
        }
    }
    // Every duration, and whether it may be zero. Each is added to an
    // instant or another duration somewhere: past a century, a clear
    // refusal rather than an overflow at start or at shutdown.
    for (key, value, zero_ok) in [
        ("latency_budget", s.latency_budget, false),
        ("deliver_timeout", s.deliver_timeout, false),
        ("target_p99", s.target_p99, false),
        ("idempotency_window", s.idempotency_window, false),
        ("header_read_timeout", s.header_read_timeout, false),
        ("body_read_timeout", s.body_read_timeout, false),
        ("retry_min", s.retry_min, true),
        ("retry_max", s.retry_max, true),
        ("breaker_max_cool_down", s.breaker_max_cool_down, false),
        ("event_retention", s.event_retention, false),
        ("shutdown_grace", s.shutdown_grace, true),
        ("status_retention", s.status_retention, true),
    ] {
        if value.is_zero() && !zero_ok {
            bad(key, "must be above 0".into());
        } else if value > MAX_DURATION {
            bad(key, "must be at most 100 years".into());
        }
    }
    if s.metrics_busiest > MAX_BUSIEST {
        bad("metrics_busiest", format!("must be at most {MAX_BUSIEST}"));
    }
    if s.max_connections > MAX_CONNECTIONS {
        bad(
            "max_connections",
            format!("must be at most {MAX_CONNECTIONS}"),
        );
    }
    for (key, value) in [
        ("max_in_flight", Some(s.max_in_flight)),
        (
            "max_in_flight_per_destination",
            s.max_in_flight_per_destination,
        ),
    ] {
        match value {
            Some(0) => bad(key, "must be at least 1".into()),
            Some(n) if u32::try_from(n).is_err() => bad(key, "must be at most 4294967295".into()),
            _ => {}
        }
    }
    if !(0.0..=1.0).contains(&s.otlp_sample_ratio) {
        bad("otlp_sample_ratio", "must be from 0 to 1".into());
    }
    if !(1..=1 << 20).contains(&s.otlp_queue) {
        bad("otlp_queue", "must be from 1 to 1048576".into());
    }
    if s.max_queue_bytes == 0 {
        bad("max_queue_bytes", "must be at least 1".into());
    }
    if s.max_body_bytes == 0 {
        bad("max_body_bytes", "must be at least 1".into());
    } else if s.max_body_bytes > s.max_queue_bytes {
        bad(
            "max_body_bytes",
            format!(
                "{} is above max_queue_bytes {}: such a body could never be held",
                s.max_body_bytes, s.max_queue_bytes
            ),
        );
    }
    if s.max_connections == 0 {
        bad("max_connections", "must be at least 1".into());
    }
    if s.dead_letter_max_bytes == 0 {
        bad("dead_letter_max_bytes", "must be at least 1".into());
    }
    if s.dead_letter_keep == 0 {
        bad("dead_letter_keep", "must be at least 1".into());
    }
    if s.fleet_size == 0 {
        bad("fleet_size", "must be at least 1".into());
    }
    if s.floor > s.ceiling {
        bad(
            "floor",
            format!("{} is above ceiling {}", s.floor, s.ceiling),
        );
    }
    if s.retries > 0 && s.retry_min > s.retry_max {
        bad("retry_min", "is above retry_max".into());
    }
    if s.global_rate.is_some() && s.redis.is_none() {
        bad(
            "global_rate",
            "a fleet-wide limit needs redis (its URL)".into(),
        );
    }
    if s.postgres.is_some() && !cfg.tenant_quotas() {
        bad(
            "postgres",
            "holds tenant quotas: give tenant_rate (or a tenant its own rate) too".into(),
        );
    }
    if !s.allow_unauthenticated {
        for (key, addr, locked) in cfg.listeners() {
            if locked || addr.ip().to_canonical().is_loopback() {
                continue;
            }
            let why = match key {
                "listen" => {
                    "no [[tenants]] are configured: anyone who can reach it could post webhooks \
                     to every destination. Configure [[tenants]] with API keys in --config"
                }
                _ => {
                    "no admin_token_sha256 is configured: anyone who can reach it could read \
                     the metrics and the destinations. Set admin_token_sha256 (hash-key prints it)"
                }
            };
            bad(
                key,
                format!(
                    "{addr} is not a loopback address and {why}, or pass \
                     --allow-unauthenticated (allow_unauthenticated = true) to serve it open"
                ),
            );
        }
    }
    if let Some(filter) = &s.log_filter
        && let Err(e) = tracing_subscriber::EnvFilter::try_new(filter)
    {
        bad("log_filter", format!("{filter:?} is not a filter: {e}"));
    }
    for (cert, key, has_cert, has_key) in [
        (
            "tls_cert",
            "tls_key",
            s.tls_cert.is_some(),
            s.tls_key.is_some(),
        ),
        (
            "admin_tls_cert",
            "admin_tls_key",
            s.admin_tls_cert.is_some(),
            s.admin_tls_key.is_some(),
        ),
    ] {
        match (has_cert, has_key) {
            (true, false) => bad(key, format!("{cert} is set: give its key too")),
            (false, true) => bad(cert, format!("{key} is set: give its certificate too")),
            _ => {}
        }
    }
    if s.admin_listen == s.listen && s.listen.port() != 0 {
        bad(
            "admin_listen",
            format!(
                "{} is the intake listener's address too: give it another port",
                s.admin_listen
            ),
        );
    }
    if s.queue == QueueKind::Redis {
        if s.redis.is_none() {
            bad("queue", "queue = redis needs redis (its URL)".into());
        }
        if s.redis_failure == FailureMode::Open && cfg.given("redis_failure") {
            bad(
                "redis_failure",
                "open cannot be kept with queue = redis: while Redis is down there is \
                 no queue to take webhooks into (intake answers 503)"
                    .into(),
            );
        }
        if s.adaptive {
            let aimd = dripfeed::rate::AimdConfig::default()
                .with_floor(s.floor)
                .with_ceiling(s.ceiling)
                .with_target_p99(s.target_p99)
                .build();
            if let Err(e) = aimd {
                bad("adaptive", format!("adaptive drain: {e}"));
            }
        }
    }
    if s.redis_wait_replicas > 0 && s.queue != QueueKind::Redis {
        bad(
            "redis_wait_replicas",
            "replicas confirm the shared queue's webhooks: it needs queue = redis".into(),
        );
    }
    let cluster = s.redis.as_ref().is_some_and(|u| {
        let u = u.as_str().trim();
        u.contains(',') && !u.starts_with("redis+sentinel://")
    });
    if s.redis_wait_replicas > 0 && cluster {
        bad(
            "redis_wait_replicas",
            "WAIT on a Redis Cluster asks every primary, not the one holding the \
             webhook: not available with a cluster"
                .into(),
        );
    }
    if s.redis.is_some() && !cfg!(feature = "redis") {
        bad(
            "redis",
            "this build has no Redis: build with --features redis".into(),
        );
    }
    if s.postgres.is_some() && !cfg!(feature = "postgres") {
        bad(
            "postgres",
            "this build has no PostgreSQL: build with --features postgres".into(),
        );
    }
}

/// A relay that serves needs somewhere to deliver.
pub(crate) fn require_destination(cfg: &Config) -> Result<(), ConfigError> {
    if !cfg.destinations.is_empty() {
        return Ok(());
    }
    Err(ConfigError::new(
        "destinations",
        None,
        "no destination: give one with --downstream URL, --destination NAME=URL (repeatable), \
         --destinations FILE, [[destinations]] in --config FILE (or DRIPFEED_DOWNSTREAM), \
         or try --demo; or give --data-dir DIR to make applications, endpoints and \
         destinations through the admin API",
    ))
}

/// Whether the relay may serve with no destination configured: the admin
/// API makes them, in a registry the operator placed (`data_dir`,
/// `state_dir` or `journal_dir` given, or systemd's `StateDirectory=`) or
/// the fleet's map. A bare start without any of these is refused, saying
/// how (it would serve nothing, and make its data directory where it was
/// run).
pub(crate) fn may_start_empty(cfg: &Config) -> bool {
    let placed = ["data_dir", "state_dir", "journal_dir"]
        .into_iter()
        .any(|key| cfg.given(key))
        || std::env::var_os("STATE_DIRECTORY").is_some_and(|v| !v.is_empty());
    let kept = cfg.paths.state_dir.is_some() && placed;
    kept || cfg.settings.queue == QueueKind::Redis
}

impl Config {
    /// Where `key`'s value came from.
    pub(crate) fn origin(&self, key: &str) -> Option<&Origin> {
        self.origins.iter().find(|(k, _)| *k == key).map(|(_, o)| o)
    }

    /// Whether `key` was given (a file, a variable, a flag), not left to
    /// its default.
    pub(crate) fn given(&self, key: &str) -> bool {
        !matches!(self.origin(key), Some(Origin::Default) | None)
    }

    /// Every address the relay listens on, with its setting and whether it
    /// is locked (intake by tenants' keys, admin by the admin token): an
    /// unlocked listener is on loopback only, unless allowed.
    pub(crate) fn listeners(&self) -> Vec<(&'static str, std::net::SocketAddr, bool)> {
        let s = &self.settings;
        vec![
            ("listen", s.listen, !self.tenants.is_empty()),
            (
                "admin_listen",
                s.admin_listen,
                s.admin_token_sha256.is_some(),
            ),
        ]
    }

    /// Whether some tenant has a quota: `tenant_rate` for all, or a
    /// tenant's own rate.
    pub(crate) fn tenant_quotas(&self) -> bool {
        self.settings.tenant_rate.is_some() || self.tenants.iter().any(|t| t.rate.is_some())
    }
}

impl Settings {
    /// The deliveries one destination may run: the setting, else 8, else
    /// with a single destination the whole budget (a cap protects the
    /// others, and there are none).
    pub(crate) fn per_destination_cap(&self, destinations: usize) -> usize {
        match (self.max_in_flight_per_destination, destinations) {
            (Some(n), _) => n.min(self.max_in_flight),
            (None, 1) => self.max_in_flight,
            (None, _) => self.shared_cap(),
        }
    }

    /// The deliveries each of the fleet's lanes may run: as
    /// [`per_destination_cap`](Self::per_destination_cap), but the whole
    /// `max_in_flight` with none configured too. A lane's deliveries take
    /// no place another lane needs (each has its own), so a cap there only
    /// bounds one destination's connections.
    #[cfg(feature = "redis")]
    pub(crate) fn lane_cap(&self, destinations: usize) -> usize {
        match (self.max_in_flight_per_destination, destinations) {
            (None, 0) => self.max_in_flight,
            _ => self.per_destination_cap(destinations),
        }
    }

    /// The deliveries each destination may run but a sole one
    /// ([`Config::sole_destination`]): the setting, else 8.
    pub(crate) fn shared_cap(&self) -> usize {
        self.max_in_flight_per_destination
            .unwrap_or(8)
            .min(self.max_in_flight)
    }
}

impl Config {
    /// The destination a relay is started with when it is the only one
    /// (configured, or kept by the admin API's registry) and not an
    /// endpoint, with no `max_in_flight_per_destination`: it may run the
    /// whole `max_in_flight` (a cap protects the others, and there are
    /// none). Decided at the start: destinations made later get
    /// [`Settings::shared_cap`], so a few dead endpoints never hold every
    /// delivery place.
    pub(crate) fn sole_destination(&self) -> Option<&str> {
        let [only] = self.destinations.as_slice() else {
            return None;
        };
        let unset = self.settings.max_in_flight_per_destination.is_none();
        (unset && only.endpoint.is_none()).then_some(only.name.as_str())
    }
}
