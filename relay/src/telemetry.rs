//! Logs and metrics: a `tracing` subscriber on stderr (`RUST_LOG` filters
//! it, `info` by default; `log_format` text or json), so the library's
//! warnings about the journal, stores and breakers reach the operator; and
//! the Prometheus recorder every throttle publishes into, installed before
//! any is built.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::value::LogFormat;

/// Gauge: bytes the relay holds for its clients (bodies, idempotency keys,
/// tenant names), against `max_queue_bytes`.
pub(crate) const HELD_BYTES: &str = "dripfeed_relay_held_bytes";
/// Gauge: idempotency keys remembered.
pub(crate) const IDEMPOTENCY_KEYS: &str = "dripfeed_relay_idempotency_keys";

/// Gauge: webhooks whose status `GET /v1/webhooks/{id}` knows (label
/// `kind`: `held`, still in the relay; `ended`, remembered after their end,
/// at most `status_max`).
pub(crate) const WEBHOOK_STATUSES: &str = "dripfeed_relay_webhook_statuses";
/// Gauge: the bytes those statuses take, roughly.
pub(crate) const WEBHOOK_STATUS_BYTES: &str = "dripfeed_relay_webhook_status_bytes";

/// Gauge, label `destination`, with `queue = redis`: the fleet's queue
/// for a destination (every relay's webhooks queued or waiting for a
/// retry), the same on every relay: read it with `max()`, never `sum()`.
/// Each relay's own `leaky_bucket_queue_depth` is what it has claimed and
/// not yet sent.
pub(crate) const FLEET_QUEUE_DEPTH: &str = "dripfeed_relay_fleet_queue_depth";
/// Gauge, label `destination`, with `queue = redis`: the fleet's bound for
/// a destination (budget × rate), the same on every relay (`max()`).
pub(crate) const FLEET_QUEUE_CAPACITY: &str = "dripfeed_relay_fleet_queue_capacity";
/// Gauge, label `destination`, with `queue = redis` and `adaptive`: 1 on
/// the relay that decides the destination's rate for the fleet (it holds
/// the lease), 0 on the others: `sum()` is 1 while the fleet adapts.
pub(crate) const FLEET_RATE_LEADER: &str = "dripfeed_relay_fleet_rate_leader";

/// Gauge: connections a listener serves now (label `listener`: `intake`
/// or `admin`).
pub(crate) const CONNECTIONS: &str = "dripfeed_relay_connections";
/// Counter: connections answered 503 and closed past `max_connections`
/// (label `listener`).
pub(crate) const CONNECTIONS_REFUSED: &str = "dripfeed_relay_connections_refused_total";

/// Counter: intake requests refused for their credentials (label
/// `status`: `401`, no key or one unknown or expired; `403`, a tenant
/// naming a destination it may not post to).
pub(crate) const AUTH_REFUSED: &str = "dripfeed_relay_auth_refused_total";

/// Counter: failed delivery attempts (labels `destination` and `kind`:
/// `dns`, `connect`, `tls`, `timeout`, `closed`, `status`, `too_large`,
/// `refused`).
pub(crate) const DELIVERY_ERRORS: &str = "dripfeed_relay_delivery_errors_total";

/// Counter: intake's answers to `POST /v1/webhooks/deliver`, labels
/// `status` (`202`, `401`, `503`, …) and `reason` (`queued`, `duplicate`,
/// `queue-full`, `over-quota`, `unauthorized`, …: the problem type, or a
/// finer cause).
pub(crate) const INTAKE_ANSWERS: &str = "dripfeed_relay_intake_answers_total";

/// Gauge: 1 while `/readyz` would answer 200, else 0 (read at each scrape).
pub(crate) const READY: &str = "dripfeed_relay_ready";
/// Gauge, label `part` ([`PARTS`]): 1 while that part is down (what
/// `/readyz` names), else 0.
pub(crate) const DOWN: &str = "dripfeed_relay_down";
/// The parts [`DOWN`] has a series for, whether down or not.
pub(crate) const PARTS: &[&str] = &[
    "journal",
    "dead-letter",
    "redis",
    "redis_durability",
    "postgres",
];

/// Gauge, labels `destination` and `bound`: a destination's configured
/// rate (`configured`, webhooks/s) and, with `adaptive`, the AIMD `floor`
/// and `ceiling` its rate in force (`leaky_bucket_drain_rate`) moves
/// between.
pub(crate) const DESTINATION_RATE: &str = "dripfeed_relay_destination_rate";

/// Counter: finished spans dropped because the export queue
/// (`otlp_queue`) was full.
pub(crate) const TRACE_SPANS_DROPPED: &str = "dripfeed_relay_trace_spans_dropped_total";
/// Counter: spans sent to the OTLP endpoint, label `result`: `ok` or
/// `failed` (the collector did not take them; they are not sent again).
pub(crate) const TRACE_EXPORTS: &str = "dripfeed_relay_trace_spans_exported_total";

/// Counter: reloads of the configuration (SIGHUP), label `result`:
/// `applied` or `refused` (nothing changed).
pub(crate) const RELOADS: &str = "dripfeed_relay_reloads_total";

/// Gauge, with the `heap-count` feature only: the bytes the process holds
/// on the heap, as its allocator counts them (what the memory test reads).
pub(crate) const HEAP_BYTES: &str = "dripfeed_relay_heap_bytes";

/// With `heap-count`: every allocation counted, for `dripfeed_relay_heap_bytes`.
#[cfg(feature = "heap-count")]
#[global_allocator]
static HEAP: cap::Cap<tikv_jemallocator::Jemalloc> =
    cap::Cap::new(tikv_jemallocator::Jemalloc, usize::MAX);

/// jemalloc: see [`return_freed_pages`].
#[cfg(not(feature = "heap-count"))]
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Starts jemalloc's background thread, which hands pages freed and
/// unused for a few seconds back to the system (its decay): what a
/// destination frees when it goes idle leaves the relay's RSS, even while
/// nothing else allocates. Without it the pages stay until the next
/// allocations.
pub(crate) fn return_freed_pages() {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(error = %e, "jemalloc's background thread did not start: freed memory returns to the system only as the relay allocates");
    }
}

/// The bytes the process holds on the heap, when counted (`heap-count`).
pub(crate) fn heap_bytes() -> Option<usize> {
    #[cfg(feature = "heap-count")]
    return Some(HEAP.allocated());
    #[cfg(not(feature = "heap-count"))]
    None
}

/// The filter without `RUST_LOG`: `info` (an overflow episode logs once
/// when it starts and once when the queue has drained to three quarters
/// of its bound; the 503s themselves are counted in `/metrics`,
/// `leaky_bucket_overflow_total`, and on the status line).
pub(crate) const DEFAULT_FILTER: &str = "info";

/// Changes the running subscriber's filter.
type Refilter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

/// The running subscriber's filter, changed by [`set_log_filter`].
static REFILTER: std::sync::OnceLock<Refilter> = std::sync::OnceLock::new();

/// Whether `RUST_LOG` is set (it wins over `log_filter`).
fn rust_log_set() -> bool {
    std::env::var_os(EnvFilter::DEFAULT_ENV).is_some()
}

/// The filter in force: `RUST_LOG` when set, else `log_filter`, else
/// [`DEFAULT_FILTER`].
fn filter_of(log_filter: Option<&str>) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        log_filter
            .and_then(|f| EnvFilter::try_new(f).ok())
            .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER))
    })
}

/// Installs the log subscriber (once; a second call changes nothing),
/// its filter `RUST_LOG`, else `log_filter`, else [`DEFAULT_FILTER`].
pub(crate) fn init_logs(format: LogFormat, log_filter: Option<&str>) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter_of(log_filter))
        // Colours on a terminal only: not as escape codes in a journal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let refilter: Option<Refilter> = match format {
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.try_init().ok().map(|()| {
                Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())) as Refilter
            })
        }
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder.try_init().ok().map(|()| {
                Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())) as Refilter
            })
        }
    };
    if let Some(refilter) = refilter {
        let _ = REFILTER.set(refilter);
    }
}

/// Makes `log_filter` the filter in force (a reload), unless `RUST_LOG`
/// is set: then it is left as it is and `Ok(false)` says so.
pub(crate) fn set_log_filter(log_filter: Option<&str>) -> Result<bool, String> {
    if rust_log_set() {
        return Ok(false);
    }
    let Some(refilter) = REFILTER.get() else {
        return Ok(false);
    };
    refilter(filter_of(log_filter)).map(|()| true)
}

/// Installs the Prometheus recorder (histograms in seconds get fixed
/// buckets) and keeps it tidy every 5 s. Call inside the runtime.
pub(crate) fn install_prometheus() -> Result<PrometheusHandle, String> {
    let seconds = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
        .and_then(|b| b.install_recorder())
        .map_err(|e| format!("metrics recorder: {e}"))?;
    metrics::describe_gauge!(
        HELD_BYTES,
        metrics::Unit::Bytes,
        "bytes held for clients: bodies, idempotency keys and tenant names"
    );
    metrics::describe_gauge!(IDEMPOTENCY_KEYS, "idempotency keys remembered");
    metrics::describe_gauge!(
        WEBHOOK_STATUSES,
        "webhooks whose status GET /v1/webhooks/{id} knows, held or ended"
    );
    metrics::describe_gauge!(
        WEBHOOK_STATUS_BYTES,
        metrics::Unit::Bytes,
        "bytes the webhook statuses take, roughly"
    );
    metrics::describe_gauge!(CONNECTIONS, "connections the intake listener serves");
    metrics::describe_gauge!(
        FLEET_QUEUE_DEPTH,
        "with queue = redis: the fleet's queue for a destination, the same on every relay (read with max())"
    );
    metrics::describe_gauge!(
        FLEET_QUEUE_CAPACITY,
        "with queue = redis: the fleet's bound for a destination, the same on every relay (read with max())"
    );
    metrics::describe_gauge!(
        FLEET_RATE_LEADER,
        "with queue = redis and adaptive: 1 on the relay deciding a destination's rate for the fleet"
    );
    metrics::describe_counter!(
        EVENTS,
        "events posted: fanned_out, no_endpoints (none subscribed), or duplicate (an idempotency key seen)"
    );
    metrics::describe_counter!(
        EVENT_COPIES,
        "an event's copies for its endpoints: queued, overflow (dead-lettered at once), or deleted (its endpoint deleted before the copy was queued: the fleet)"
    );
    metrics::describe_counter!(
        CONNECTIONS_REFUSED,
        "connections answered 503 and closed past max_connections"
    );
    metrics::describe_gauge!(
        HEAP_BYTES,
        "bytes the process holds on the heap, as its allocator counts them (heap-count builds only)"
    );
    metrics::describe_counter!(
        TRACE_SPANS_DROPPED,
        "finished spans dropped because the export queue (otlp_queue) was full"
    );
    metrics::describe_counter!(
        TRACE_EXPORTS,
        "spans sent to the OTLP endpoint: ok, or failed (not sent again)"
    );
    metrics::describe_counter!(
        RELOADS,
        "reloads of the configuration on SIGHUP: applied, or refused (nothing changed)"
    );
    metrics::describe_counter!(
        DELIVERY_ERRORS,
        "failed delivery attempts by destination and kind (dns, connect, tls, timeout, closed, status, too_large, refused)"
    );
    metrics::describe_counter!(
        INTAKE_ANSWERS,
        "intake's answers to POST /v1/webhooks/deliver by status and reason"
    );
    metrics::describe_gauge!(READY, "1 while /readyz would answer 200, else 0");
    metrics::describe_gauge!(
        DOWN,
        "1 while a part /readyz checks is down (journal, dead-letter, redis, redis_durability, postgres)"
    );
    metrics::describe_gauge!(
        DESTINATION_RATE,
        "a destination's configured rate, and its AIMD floor and ceiling when adaptive, webhooks/s"
    );
    metrics::describe_counter!(
        AUTH_REFUSED,
        "intake requests refused for their credentials: 401 (no key, unknown or expired), 403 (a destination the tenant may not use)"
    );
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// `page` (Prometheus text) without the series of destinations no longer
/// held: a series labelled `destination="NAME"` stays while `held(NAME)`
/// (and `_other`, the unnamed ones' sum, always). The recorder keeps a
/// deleted destination's series (metrics cannot be unregistered); the page
/// stays bounded by `max_destinations` however many come and go.
pub(crate) fn only_held(page: &str, held: impl Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(page.len());
    for line in page.lines() {
        let kept = match line.find("destination=\"") {
            Some(at) if !line.starts_with('#') => {
                let rest = &line[at + "destination=\"".len()..];
                let name = rest.split('"').next().unwrap_or_default();
                name == dripfeed::destinations::OTHER || held(name)
            }
            _ => true,
        };
        if kept {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Gauge, labels `destination` and `by` (`held`: webhooks it holds here;
/// `errors`: failed attempts since the relay started, among destinations
/// that failed in the last [`FAILING_WITHIN`]): the `metrics_busiest`
/// destinations with the most, whatever their `metrics` setting, so the
/// few that need a look are named however many there are. Written into
/// each scrape afresh: a destination no longer among them leaves the page.
pub(crate) const BUSIEST: &str = "dripfeed_relay_busiest";

/// How recently a destination must have failed to be among the busiest
/// by errors.
pub(crate) const FAILING_WITHIN: std::time::Duration = std::time::Duration::from_secs(300);

/// Appends the [`BUSIEST`] series to `page`.
pub(crate) fn busiest(page: &mut String, held: &[(String, u64)], errors: &[(String, u64)]) {
    use std::fmt::Write as _;
    if held.is_empty() && errors.is_empty() {
        return;
    }
    let _ = writeln!(
        page,
        "# HELP {BUSIEST} The busiest destinations (by webhooks held here, and by failed attempts)."
    );
    let _ = writeln!(page, "# TYPE {BUSIEST} gauge");
    for (by, all) in [("held", held), ("errors", errors)] {
        for (name, n) in all {
            // Names are 1 to 64 of A-Z a-z 0-9 . _ -: nothing to escape.
            let _ = writeln!(page, "{BUSIEST}{{destination=\"{name}\",by=\"{by}\"}} {n}");
        }
    }
}

/// Counter, label `result` (`fanned_out`, `no_endpoints`, `duplicate`):
/// events taken.
pub(crate) const EVENTS: &str = "dripfeed_relay_events_total";

/// Counter, label `outcome` (`queued`, `overflow`, `deleted`): events'
/// copies made.
pub(crate) const EVENT_COPIES: &str = "dripfeed_relay_event_copies_total";

/// Gauge: lines in the dead-letter files the relay keeps (the live file and
/// its rotated ones), as of its last write or check.
pub(crate) const DEAD_LETTER_LINES: &str = "dripfeed_relay_dead_letter_lines";

/// Counter, label `reason` (`io`: the disk refused a write or a sync, or
/// the file could not be made again; `full`: every file of the set is
/// full): attempts to write dead-letter lines that failed.
pub(crate) const DEAD_LETTER_WRITE_FAILURES: &str =
    "dripfeed_relay_dead_letter_write_failures_total";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_no_longer_held_leaves_the_page() {
        let page = "# TYPE leaky_bucket_queue_depth gauge\n\
                    leaky_bucket_queue_depth{throttle=\"webhook_relay\",destination=\"a\"} 1\n\
                    leaky_bucket_queue_depth{throttle=\"webhook_relay\",destination=\"gone\"} 2\n\
                    leaky_bucket_queue_depth{throttle=\"webhook_relay\",destination=\"_other\"} 3\n\
                    dripfeed_relay_held_bytes 4\n";
        let kept = only_held(page, |n| n == "a");
        assert!(kept.contains("destination=\"a\"} 1"));
        assert!(!kept.contains("gone"));
        assert!(kept.contains("_other") && kept.contains("held_bytes 4"));
        assert!(kept.starts_with("# TYPE"));
    }
}
