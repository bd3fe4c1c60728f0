//! The queue: one `dripfeed::destinations::Destinations` set made from the
//! configuration. A single `downstream` is a set with one destination
//! (`default`); there is no other throttle.
//!
//! The set's template carries what every destination shares: the metrics
//! name `webhook_relay`, rate, budget, overflow, the per-destination cap,
//! timeout, AIMD, retries, the dead-letter file, the tenant quota store (one
//! for every destination) and the fleet's permits (one limit for every
//! destination of every relay). The set carries the shared in-flight
//! budget, the breaker, each destination's overrides and the journal (one
//! for every destination, each record naming its destination).

pub mod fleet;
pub mod redis_link;
pub mod shared;
pub mod shared_changes;
mod shared_drain;
mod shared_lane;
pub mod shared_letters;
mod shared_sweep;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::destinations::{BreakerConfig, DestinationConfig, Destinations};
use dripfeed::journal::Journal;
use dripfeed::keyed::BucketStore;
use dripfeed::rate::AimdConfig;
use dripfeed::{Overflow, PermitSource, RetryPolicy, Throttle, ThrottleBuilder};

use crate::catalog::Catalog;
use crate::config::value::OverflowPolicy;
use crate::config::{Config, ConfigError, Settings};
use crate::dead_letter::FileSink;
use crate::deliver::HttpDownstream;
use crate::deliver::guard::AddressGuard;
use crate::deliver::latency::Latencies;
use crate::domain::job::Job;
use crate::status::Registry;

/// The metrics' `throttle` label.
pub const NAME: &str = "webhook_relay";

/// Webhooks the set holds at once, across destinations.
const MAX_JOBS: usize = 1_000_000;

/// The running set.
pub struct Queue {
    /// The destinations.
    pub set: Destinations<Job>,
    /// Webhooks found unfinished in the journal at start.
    pub recovered: usize,
    /// The journal, holding its directory's lock (`None`: memory only).
    pub journal: Option<Journal>,
}

/// What the set is built with besides the configuration.
pub struct Parts {
    /// The dead-letter file.
    pub sink: Arc<FileSink>,
    /// The HTTP client.
    pub client: crate::deliver::client::Client,
    /// Where deliveries may connect (the client's resolver has it too).
    pub guard: Arc<AddressGuard>,
    /// Where deliveries record their latency.
    pub latencies: Arc<Latencies>,
    /// The tenant quota store, if tenants have quotas.
    pub tenants: Option<Arc<dyn BucketStore>>,
    /// The fleet's permits, if the fleet shares a limit.
    pub permits: Option<Arc<dyn PermitSource>>,
    /// Every webhook's status: told of each attempt, retry and end.
    pub status: Arc<Registry>,
    /// The destinations in force: each delivery reads its URL and keys.
    pub catalog: Arc<Catalog>,
}

/// The highest rate a destination may have: the adaptive ceiling, else
/// the largest rate any destination is given.
fn max_rate(cfg: &Config) -> f64 {
    let s = &cfg.settings;
    if s.adaptive {
        return s.ceiling;
    }
    cfg.destinations
        .iter()
        .flat_map(|d| [d.rate, d.ceiling])
        .flatten()
        .fold(s.drain_rate, f64::max)
}

/// The settings every destination's throttle shares, before the parts
/// that need a running relay (dead-letter file, stores, permits).
fn template(cfg: &Config) -> Result<ThrottleBuilder<Job>, String> {
    let s = &cfg.settings;
    let cap = s.per_destination_cap(cfg.destinations.len());
    let mut b = Throttle::builder()
        .name(NAME)
        .drain_rate(s.drain_rate)
        .latency_budget(s.latency_budget)
        .max_in_flight(cap)
        // The client's own timeout ends a delivery first, as an answer.
        .deliver_timeout(s.deliver_timeout + Duration::from_secs(1));
    if s.adaptive {
        let aimd = AimdConfig::default()
            .with_floor(s.floor)
            .with_ceiling(s.ceiling)
            .with_target_p99(s.target_p99)
            .build()
            .map_err(|e| format!("adaptive drain: {e}"))?;
        b = b.adaptive(aimd);
    } else {
        b = b.max_rate(max_rate(cfg));
    }
    if s.retries > 0 {
        let policy =
            RetryPolicy::new(s.retries.saturating_add(1)).backoff(s.retry_min, s.retry_max);
        b = b.retries(policy);
    }
    Ok(b)
}

/// A destination's overrides.
pub fn overrides(d: &crate::config::Destination) -> DestinationConfig {
    let mut c = DestinationConfig::default();
    if let Some(r) = d.rate {
        c = c.rate(r);
    }
    if let Some(r) = d.ceiling {
        c = c.ceiling(r);
    }
    if let Some(b) = d.budget {
        c = c.budget(b);
    }
    c
}

/// What the library refuses in the settings (for `check-config` and
/// before start): rates against ceilings, a ring too large, …
pub fn check(cfg: &Config) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    match template(cfg) {
        Err(e) => errors.push(ConfigError::new(
            "adaptive",
            cfg.origin("adaptive").cloned(),
            e,
        )),
        Ok(t) => {
            if let Err(e) = t.validate() {
                errors.push(ConfigError::new(
                    "settings",
                    None,
                    format!("the queue refuses them: {e}"),
                ));
            }
        }
    }
    let max = max_rate(cfg);
    for d in &cfg.destinations {
        if let Err(e) = overrides(d).validate(max) {
            errors.push(ConfigError::new(
                format!("destinations.{}", d.name),
                Some(d.origin.clone()),
                e.to_string(),
            ));
        }
    }
    errors
}

/// The set, its journal in `journal` (`None`: memory only).
pub fn build(cfg: &Config, journal: Option<&Path>, parts: Parts) -> Result<Queue, String> {
    let s: &Settings = &cfg.settings;
    let evicted_to = parts.sink.clone();
    let mut t = template(cfg)?
        .overflow(match s.overflow {
            OverflowPolicy::TailDrop => Overflow::TailDrop,
            OverflowPolicy::HeadDrop => Overflow::HeadDrop,
            OverflowPolicy::DeadLetter => Overflow::DeadLetter,
        })
        .dead_letter(parts.sink.clone())
        .on_evicted(move |job: Job| {
            if evicted_to.offer(job, "evicted").is_err() {
                tracing::error!("the dead-letter writer is gone: an evicted webhook was dropped");
            }
        });
    if let Some(store) = parts.tenants {
        t = t.key_store(store);
    }
    if let Some(permits) = parts.permits {
        t = t.permits(permits);
    }
    let mut builder = Destinations::builder(t)
        .max_in_flight(s.max_in_flight)
        .max_jobs(MAX_JOBS)
        .max_destinations(s.max_destinations.max(cfg.destinations.len()).max(1))
        .breaker(BreakerConfig::default())
        .drain_hook(parts.status.clone());
    for d in &cfg.destinations {
        builder = builder.destination(d.name.clone(), overrides(d));
    }
    let mut recovered = 0;
    let journal = match journal {
        Some(dir) => {
            let journal =
                Journal::open(dir).map_err(|e| format!("journal {}: {e}", dir.display()))?;
            recovered = journal.recovered();
            let status = parts.status.clone();
            builder = builder.journal(journal.clone()).on_recovered(
                move |dest: &str, id: u64, job: &Job| {
                    let public = job.trail.name(id);
                    let tenant = job.tenant.as_deref();
                    status.recovered(id, public, tenant, dest, job.received_unix_ms);
                },
            );
            Some(journal)
        }
        None => None,
    };
    let (client, latencies, guard, status, catalog) = (
        parts.client,
        parts.latencies,
        parts.guard,
        parts.status,
        parts.catalog,
    );
    let set = builder
        .build(move |name: &str| {
            // Configured names, and those the journal recovered: a name no
            // longer in the catalog has no URL and its webhooks are
            // dead-lettered.
            HttpDownstream {
                client: client.clone(),
                name: Arc::from(name),
                targets: catalog.clone(),
                latencies: latencies.clone(),
                guard: guard.clone(),
                status: Some(status.clone()),
            }
        })
        .map_err(|e| format!("destinations: {e}"))?;
    Ok(Queue {
        set,
        recovered,
        journal,
    })
}

/// The capacity a destination has at its rate: budget × rate, at least 1.
pub fn capacity(cfg: &Config, name: &str) -> u64 {
    let s = &cfg.settings;
    let d = cfg.destinations.iter().find(|d| d.name == name);
    let rate = d.and_then(|d| d.rate).unwrap_or(s.drain_rate);
    let budget = d.and_then(|d| d.budget).unwrap_or(s.latency_budget);
    (budget.as_secs_f64() * rate).ceil().max(1.0) as u64
}
