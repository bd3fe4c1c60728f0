//! The local engine's set: one `dripfeed::destinations::Destinations` made
//! from the configuration. A single `downstream` is a set with one
//! destination (`default`); there is no other throttle.
//!
//! The set's template carries what every destination shares: the metrics
//! name `webhook_relay`, rate, budget, overflow, the per-destination cap,
//! timeout, AIMD, retries, the dead-letter file, the tenant quota store (one
//! for every destination) and the fleet's permits (one limit for every
//! destination of every relay). The set carries the shared in-flight
//! budget, the breaker, each destination's overrides and the journal (one
//! for every destination, each record naming its destination).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::destinations::{BreakerConfig, DestinationConfig, Destinations};
use dripfeed::journal::Journal;
use dripfeed::keyed::BucketStore;
use dripfeed::rate::AimdConfig;
use dripfeed::{PermitSource, RetryPolicy, Throttle, ThrottleBuilder};

use super::super::NAME;
use crate::config::{Config, ConfigError, Settings};
use crate::dead_letter::FileSink;
use crate::deliver::deliveries::Deliveries;
use crate::domain::job::Job;
use crate::domain::limits::{Limits, MAX_JOBS};
use crate::status::Registry;

/// The running set.
pub(crate) struct Built {
    /// The destinations.
    pub set: Destinations<Job>,
    /// Webhooks found unfinished in the journal at start.
    pub recovered: usize,
    /// The journal, holding its directory's lock (`None`: memory only).
    pub journal: Option<Journal>,
}

/// What the set is built with besides the configuration.
pub(crate) struct Parts {
    /// The dead-letter file.
    pub sink: Arc<FileSink>,
    /// Each destination's deliveries, by name.
    pub deliveries: Arc<Deliveries>,
    /// The tenant quota store, if tenants have quotas.
    pub tenants: Option<Arc<dyn BucketStore>>,
    /// The fleet's permits, if the fleet shares a limit.
    pub permits: Option<Arc<dyn PermitSource>>,
    /// Every webhook's status: told of each attempt, retry and end.
    pub status: Arc<Registry>,
}

/// The highest rate a destination may have: the adaptive ceiling, else
/// the largest rate any destination is given.
fn max_rate(cfg: &Config) -> f64 {
    Limits::local(cfg)
        .max_rate
        .unwrap_or(cfg.settings.drain_rate)
}

/// The settings every destination's throttle shares, before the parts
/// that need a running relay (dead-letter file, stores, permits).
fn template(cfg: &Config) -> Result<ThrottleBuilder<Job>, String> {
    let s = &cfg.settings;
    let cap = s.shared_cap();
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

/// The deliveries at once of the local engine's destinations: each the
/// template's ([`Settings::shared_cap`](crate::config::Settings::shared_cap)),
/// but the sole destination a relay is started with
/// ([`Config::sole_destination`]), which may run all of `max_in_flight`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caps {
    sole: Option<(String, usize)>,
}

impl Caps {
    pub(crate) fn of(cfg: &Config) -> Caps {
        let sole = cfg.sole_destination();
        Caps {
            sole: sole.map(|name| (name.to_owned(), cfg.settings.max_in_flight)),
        }
    }

    /// `d`'s overrides, its cap among them if it is the sole one.
    pub(crate) fn overrides(&self, d: &crate::config::Destination) -> DestinationConfig {
        let c = overrides(d);
        match &self.sole {
            Some((name, cap)) if *name == d.name && d.endpoint.is_none() => c.max_in_flight(*cap),
            _ => c,
        }
    }
}

/// A destination's overrides.
fn overrides(d: &crate::config::Destination) -> DestinationConfig {
    let mut c = DestinationConfig::default().own_series(d.own_series());
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

/// What the local engine refuses in the settings (for `check-config` and
/// before start): the template the library refuses (rates against
/// ceilings, a ring too large), and each destination as
/// [`Limits::check`] finds it.
pub(crate) fn check(cfg: &Config) -> Vec<ConfigError> {
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
    errors.extend(destination_errors(cfg, &Limits::local(cfg)));
    errors
}

/// Each destination of `cfg` that `limits` refuses, as a configuration error.
pub(crate) fn destination_errors(cfg: &Config, limits: &Limits) -> Vec<ConfigError> {
    cfg.destinations
        .iter()
        .filter_map(|d| {
            let e = limits.check(d).err()?;
            Some(ConfigError::new(
                format!("destinations.{}", d.name),
                Some(d.origin.clone()),
                e,
            ))
        })
        .collect()
}

/// The set, its journal in `journal` (`None`: memory only).
pub(crate) fn build(cfg: &Config, journal: Option<&Path>, parts: Parts) -> Result<Built, String> {
    let s: &Settings = &cfg.settings;
    let evicted_to = parts.sink.clone();
    let mut t = template(cfg)?
        .overflow(s.overflow.policy())
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
        .max_jobs(MAX_JOBS as usize)
        .max_destinations(s.max_destinations.max(cfg.destinations.len()).max(1))
        .breaker(BreakerConfig::default().cool_down(
            s.breaker_max_cool_down.min(Duration::from_secs(1)),
            s.breaker_max_cool_down,
        ))
        // One scheduler for the drains: a few driver tasks however many
        // destinations have work (two per core), not a task each.
        .drivers(2 * std::thread::available_parallelism().map_or(1, |n| n.get()))
        .drain_hook(parts.status.clone());
    let caps = Caps::of(cfg);
    for d in &cfg.destinations {
        builder = builder.destination(d.name.clone(), caps.overrides(d));
    }
    let mut recovered = 0;
    let journal = match journal {
        Some(dir) => {
            let journal = Journal::options()
                .file_modes(crate::util::private::modes())
                .open(dir)
                .map_err(|e| format!("journal {}: {e}", dir.display()))?;
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
    // Configured names, and those the journal recovered: a name no longer
    // held has no URL and its webhooks are dead-lettered.
    let deliveries = parts.deliveries;
    let set = builder
        .build(move |name: &str| deliveries.of(name))
        .map_err(|e| format!("destinations: {e}"))?;
    Ok(Built {
        set,
        recovered,
        journal,
    })
}
