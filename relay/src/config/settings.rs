//! The one table of settings: each line is a file key, a flag
//! (`--key-with-dashes`) and an environment variable (`DRIPFEED_KEY`), with
//! its type and default. The doc comment is the flag's `--help`.
//! `relay/relay.example.toml` lists every key with its default (a test
//! holds it to this table).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::cidrs::CidrList;
use super::declare::declare_settings;
use super::value::{
    FailureMode, HttpUrl, LogFormat, ModePolicy, OverflowPolicy, QueueKind, RedisDurability,
    StoreUrl,
};
use crate::config::digest::KeyDigest;

declare_settings! {
    /// Address the relay listens on; port 0 takes any free port (the relay
    /// prints the address it got).
    listen: SocketAddr = "127.0.0.1:8080";
    /// A single receiver: the destination named `default`. Requests without
    /// the destination header go to it when it is the only destination.
    downstream: HttpUrl;
    /// The request header that names a destination.
    destination_header: String = "X-Destination";
    /// The request header that names the tenant.
    tenant_header: String = "X-Tenant";
    /// Each tenant's sustained rate, webhooks/s; over it, 429. Unset: tenants
    /// are not limited.
    tenant_rate: f64;
    /// Each tenant's burst, webhooks (with tenant_rate).
    tenant_burst: f64 = "50";
    /// Bytes the relay may hold for its clients: bodies (queued, in flight,
    /// or on their way to the dead-letter file), Idempotency-Keys and tenant
    /// names; over it, 503.
    max_queue_bytes: u64 = "67108864";
    /// The largest body taken, bytes; over it, 413 (at once when the
    /// request's Content-Length says so, before its body is read).
    max_body_bytes: u64 = "1048576";
    /// How long an accepted Idempotency-Key is remembered, e.g. 24h (or
    /// until max_queue_bytes needs its room, oldest first).
    idempotency_window: Duration = "1day";
    /// Connections served at once; past it a new connection is answered
    /// 503 and closed.
    max_connections: usize = "1024";
    /// How long a client may take to send a request's head, e.g. 10s;
    /// then the connection is closed.
    header_read_timeout: Duration = "10s";
    /// How long a client may take to send a request's body, e.g. 30s;
    /// then 408 and the connection is closed.
    body_read_timeout: Duration = "30s";
    /// Drain rate, webhooks per second (each destination's unless it says
    /// otherwise).
    drain_rate: f64 = "200";
    /// Worst queueing delay accepted: a destination holds budget × rate
    /// webhooks, e.g. 2s or 500ms.
    latency_budget: Duration = "2s";
    /// What happens when a destination's queue is full: tail-drop (503),
    /// head-drop or dead-letter.
    overflow: OverflowPolicy = "tail-drop";
    /// Let each destination's drain rate follow its receiver's p99 (AIMD
    /// between floor and ceiling).
    adaptive: bool = "false";
    /// Lowest adaptive rate, per second.
    floor: f64 = "20";
    /// Highest adaptive rate, per second.
    ceiling: f64 = "400";
    /// The receiver p99 the adaptive drain aims under, e.g. 150ms.
    target_p99: Duration = "150ms";
    /// Deliveries running at once, shared by every destination (with
    /// queue = redis: each destination's on this relay, none shared).
    max_in_flight: usize = "64";
    /// The most deliveries one destination may have running (its cap in
    /// max_in_flight): a dead receiver holds no more. Unset: 8, but a
    /// relay started with one destination (not an endpoint) lets that one
    /// run all of max_in_flight (those made later through the admin API
    /// get 8); with queue = redis, all of max_in_flight with none or one
    /// configured.
    max_in_flight_per_destination: usize;
    /// How long a delivery may take before it counts as failed, e.g. 10s.
    deliver_timeout: Duration = "10s";
    /// A PEM file of CA certificates trusted for https:// receivers besides
    /// the system's roots.
    ca_file: PathBuf;
    /// Retries after the first attempt: a webhook the receiver answers 408,
    /// 429 or 5xx (or never answers) is tried again after exponential
    /// backoff with full jitter, or after its Retry-After; 0 = no retries.
    /// Other 4xx are final.
    retries: u32 = "8";
    /// The first retry's backoff ceiling (it doubles per retry), e.g. 1s.
    retry_min: Duration = "1s";
    /// The longest backoff, and the cap on a receiver's Retry-After, e.g. 10m.
    retry_max: Duration = "10m";
    /// The directory holding the journal (journal/, with the registry,
    /// statuses and idempotency keys) and the dead letters
    /// (dead-letter.jsonl), unless each is given. Unset: $STATE_DIRECTORY
    /// (systemd's StateDirectory=), else ./dripfeed-data.
    data_dir: PathBuf;
    /// Where undeliverable webhooks are written, one JSON line each.
    /// Unset: dead-letter.jsonl in data_dir.
    dead_letter_file: PathBuf;
    /// Where accepted webhooks are journaled: a 202 is answered once the
    /// webhook is on disk there, and a restart delivers what was unfinished.
    /// Unset: journal in data_dir.
    journal_dir: PathBuf;
    /// Keep webhooks in memory only: a crash loses what was accepted.
    no_journal: bool = "false";
    /// Where the admin API's changes to destinations are kept
    /// (registry.kv, mode 0600: it holds their secrets; a state.json of an earlier version is migrated into it), applied over the
    /// configured destinations at start. Unset: the journal directory; with
    /// no_journal and no state_dir the admin API cannot change destinations.
    state_dir: PathBuf;
    /// A data directory (data_dir, journal_dir, state_dir) or a file the
    /// relay keeps in them that others may read or write: fix (made
    /// owner-only, 0700 and 0600, with a warning; one that is not this
    /// user's, or a shared sticky directory, is left with the warning),
    /// refuse (the start fails naming it) or warn (left as it is). A
    /// symbolic link where such a file is kept (the dead-letter file
    /// among them) is always refused, never followed.
    file_modes: ModePolicy = "fix";
    /// The most destinations, configured and made through the admin API
    /// together: a guard against a runaway client, not a cost (an idle
    /// destination holds its settings and under a KiB; one with work, its
    /// ring and a few KiB more, given back once it is idle).
    max_destinations: usize = "100000";
    /// The longest a destination's open circuit breaker waits before it
    /// probes its receiver again (the wait starts at 1s and doubles while
    /// the receiver stays down; its queue waits meanwhile, what does not
    /// fit is refused or dead-lettered by the overflow policy), e.g. 5m.
    breaker_max_cool_down: Duration = "5m";
    /// How long an event (its payload, copies and attempts) is kept once
    /// every copy has ended, e.g. 7days; a copy still on its way keeps
    /// its event. The local engine sweeps at start and once a minute.
    event_retention: Duration = "7days";
    /// The most bytes the events store holds live: past it, the oldest
    /// ended events go first (only until it is under the bound), whatever
    /// event_retention says. Its file may hold twice that and 8 MiB more
    /// before it is rewritten.
    event_retention_bytes: u64 = "1073741824";
    /// How many of the busiest destinations /metrics names in
    /// dripfeed_relay_busiest (by webhooks held, and by failed attempts),
    /// whatever their metrics setting; 0: none.
    metrics_busiest: usize = "10";
    /// How long shutdown keeps draining before leaving the rest in the
    /// journal (or the dead-letter file without one), deliveries still
    /// running at its end included: the relay exits within it and a second.
    shutdown_grace: Duration = "10s";
    /// Redis URL holding the fleet-wide delivery limit shared by every relay
    /// (and the tenant quotas, without postgres); several URLs separated by
    /// commas name nodes of a Redis Cluster; redis+sentinel://host:port,…/NAME
    /// names the sentinels watching the primary NAME (followed through a
    /// failover).
    redis: StoreUrl;
    /// Where accepted webhooks wait: local (this relay, journaled on its
    /// disk) or redis (Redis Streams shared by every relay with the same
    /// redis: a node that dies loses nothing).
    queue: QueueKind = "local";
    /// This relay's name in the shared queue (queue = redis): unique in the
    /// fleet and the same across its restarts. Unset: host name and the
    /// listen port.
    node_name: String;
    /// What the fleet's Redis may keep (queue = redis), as you accept it:
    /// always, everysec or none. Unset: the relay reads Redis's settings
    /// (CONFIG GET, on every primary) at start and every minute and
    /// refuses one without an append-only file fsynced at least every
    /// second, or that evicts keys; required where Redis refuses CONFIG.
    redis_durability: RedisDurability;
    /// Replicas of the Redis primary that must confirm each webhook before
    /// its 202 (queue = redis, `WAIT` within 100 ms); fewer answer 503
    /// unreplicated. 0: the primary's word is enough.
    redis_wait_replicas: u32 = "0";
    /// The fleet-wide limit over every destination, deliveries/s (with
    /// redis). Unset: drain_rate with the local queue; none with queue =
    /// redis (each destination keeps its own rate).
    global_rate: f64;
    /// Relays in the fleet: while Redis is down and failing open, each
    /// delivers global rate / fleet size.
    fleet_size: u32 = "1";
    /// What to do while Redis is unreachable: open (a local share) or
    /// closed (pause deliveries; tenants get 503).
    redis_failure: FailureMode = "open";
    /// PostgreSQL URL holding the tenant quotas shared by every relay (with
    /// tenant_rate), e.g. postgres://user@127.0.0.1:5432/db.
    postgres: StoreUrl;
    /// What to do while PostgreSQL is unreachable: open (local buckets) or
    /// closed (503).
    postgres_failure: FailureMode = "closed";
    /// Log lines on stderr: text or json (RUST_LOG filters them; default info).
    log_format: LogFormat = "text";
    /// Capacity of the demo's built-in receiver, requests per second.
    receiver_capacity: f64 = "200";
    /// The most bytes one dead-letter file holds: a line that would pass it
    /// goes to a new file, the full one renamed FILE.1, FILE.2, … (oldest
    /// first; a line longer than this still fills an empty file).
    dead_letter_max_bytes: u64 = "1073741824";
    /// Dead-letter files kept: the live one and up to this many minus one
    /// rotated ones. When all are full, intake answers 503
    /// (dead-letter-full) and nothing is written: the relay never deletes
    /// a dead-letter file (move rotated ones away once redriven).
    dead_letter_keep: u32 = "8";
    /// A PEM certificate chain (the server's certificate first): the intake
    /// listener speaks TLS (with tls_key). Re-read on SIGHUP.
    tls_cert: PathBuf;
    /// The PEM private key of tls_cert.
    tls_key: PathBuf;
    /// A PEM certificate chain for the admin listener (with
    /// admin_tls_key). Re-read on SIGHUP.
    admin_tls_cert: PathBuf;
    /// The PEM private key of admin_tls_cert.
    admin_tls_key: PathBuf;
    /// Which log lines are written, as RUST_LOG takes it (e.g.
    /// info,dripfeed_relay=debug); RUST_LOG, when set, wins. Unset: info.
    /// Changed on SIGHUP.
    log_filter: String;
    /// Where to send traces, OTLP over HTTP (protobuf), as the full URL
    /// (e.g. http://collector:4318/v1/traces): a trace per webhook, with a
    /// span for intake and one per delivery attempt, continuing a sender's
    /// traceparent and sending one to the receiver. Unset: the standard
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT
    /// with /v1/traces added; none of them: no traces.
    otlp_endpoint: HttpUrl;
    /// The share of new traces kept, from 0 to 1 (a sender's traceparent
    /// decides for the traces it starts: sampled or not).
    otlp_sample_ratio: f64 = "1";
    /// Finished spans that may wait for export; past it a span is dropped
    /// and counted (dripfeed_relay_trace_spans_dropped_total).
    otlp_queue: usize = "4096";
    /// Print the status line (depth, rate, p99, refusals) on stdout each
    /// second. Unset: only when stdout is a terminal;
    /// otherwise a summary is logged at INFO once a minute.
    status_line: bool;
    /// Address of the admin listener: GET /metrics, /healthz, /readyz and
    /// the admin API (/v1/destinations); port 0 takes any free port. Without
    /// admin_token_sha256 it must be a loopback address.
    admin_listen: SocketAddr = "127.0.0.1:8090";
    /// Serve without `[[tenants]]` (no API keys) on a listen address that is
    /// not loopback, or without admin_token_sha256 on an admin_listen
    /// address that is not: anyone who can reach it can post (or manage).
    /// Without it such a relay refuses to start.
    allow_unauthenticated: bool = "false";
    /// The hex SHA-256 of the admin token (dripfeed-relay hash-key prints
    /// it): the bearer token of the admin API.
    admin_token_sha256: KeyDigest;
    /// An address range deliveries may connect to although it is
    /// loopback, private, link-local, CGNAT or unspecified, e.g.
    /// 10.0.0.0/8 (repeatable; the variable takes a comma-separated list).
    allow_destination_cidrs: CidrList, repeat "allow-destination-cidr";
    /// At start, resolve each destination's host name and refuse one that
    /// resolves to a refused address; false leaves names to the check made
    /// at every connection (for names that resolve differently later).
    resolve_destinations_at_start: bool = "true";
    /// How long GET /v1/webhooks/{id} remembers a delivered or
    /// dead-lettered webhook, e.g. 24h (kept beside the journal, so a
    /// restart remembers; without a journal, in memory only).
    status_retention: Duration = "1day";
    /// The most ended webhooks GET /v1/webhooks/{id} remembers; past it the
    /// oldest are forgotten first (0: only held webhooks are known).
    status_max: usize = "1000000";
}
