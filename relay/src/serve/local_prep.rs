//! The local engine opened: the dead-letter file, the webhook statuses
//! read back beside the journal, the destinations set and its journal
//! (what the journal kept for destinations no longer configured
//! dead-lettered at once), the idempotency keys, and the admin API's
//! changes in the registry.

use std::path::PathBuf;
use std::sync::Arc;

use super::Failure;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::dead_letter::{self, FileSink};
use crate::deliver::deliveries::Deliveries;
use crate::deliver::target::Targets as _;
use crate::domain::budget::ByteBudget;
use crate::domain::limits::Limits;
use crate::queue::local::idempotency::{self, Idempotency};
use crate::queue::local::{self, Local, build, changes};
use crate::queue::stores::StoreCheck;
use crate::status::Registry;

/// What the local engine is opened with, besides the configuration.
pub(super) struct Parts {
    /// The journal's directory (`None`: memory only).
    pub journal_dir: Option<PathBuf>,
    /// The registry of the admin API's changes (`None`: no state
    /// directory, or a demo).
    pub state: Option<crate::catalog::registry::Registry>,
    /// The destinations in force.
    pub catalog: Arc<Catalog>,
    /// Every webhook's status.
    pub status: Arc<Registry>,
    /// Each destination's deliveries, by name.
    pub deliveries: Arc<Deliveries>,
    /// The tenant quota store, if tenants have quotas.
    pub quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
    /// The shared tenant quota store's check, if any.
    pub stores: Vec<StoreCheck>,
    /// The fleet's permits, if the fleet shares a limit (`global_rate`).
    pub permits: Option<Arc<dyn dripfeed::PermitSource>>,
    /// Bytes held for clients.
    pub budget: ByteBudget,
}

/// The local engine.
pub(super) async fn open(cfg: &Config, parts: Parts) -> Result<Arc<Local>, Failure> {
    let s = &cfg.settings;
    let fallback = match &cfg.destinations[..] {
        [only] => only.name.clone(),
        _ => "unknown".to_owned(),
    };
    let paths = &cfg.paths;
    if let Some(note) = &paths.old_layout {
        tracing::warn!("{note}");
    }
    say!(
        "files: journal {}, dead letters {}, registry {}",
        parts
            .journal_dir
            .as_deref()
            .map_or("none (memory only)".into(), |d| d.display().to_string()),
        paths.dead_letter_file.display(),
        parts
            .state
            .as_ref()
            .map_or("none".into(), |st| st.path().display().to_string()),
    );
    if paths.dead_letter_file.parent() == Some(paths.data_dir.as_path()) {
        crate::util::private::dir(&paths.data_dir)
            .map_err(|e| format!("data_dir {}: {e}", paths.data_dir.display()))?;
    }
    let sink = Arc::new(
        FileSink::open(dead_letter::Options {
            path: paths.dead_letter_file.clone(),
            fallback,
            max_bytes: s.dead_letter_max_bytes,
            keep: s.dead_letter_keep,
        })
        .map_err(|e| format!("dead_letter_file {e}"))?,
    );
    let status = parts.status;
    // Ended statuses kept beside the journal, read back before recovery
    // starts delivering (so the ends it makes are written after them).
    if let Some(dir) = &parts.journal_dir {
        crate::util::private::dir(dir)
            .map_err(|e| format!("journal_dir {}: {e}", dir.display()))?;
        match status.attach(dir, s.status_max) {
            Ok((remembered, bad)) => tracing::info!(
                remembered,
                unreadable_lines = bad,
                "webhook statuses read back from {}",
                dir.display()
            ),
            Err(e) => {
                let file = dir.join(crate::status::file::FILE);
                return Err(format!("webhook statuses {}: {e}", file.display()).into());
            }
        }
    }
    let deliveries = parts.deliveries;
    let built = build::build(
        cfg,
        parts.journal_dir.as_deref(),
        build::Parts {
            sink: sink.clone(),
            deliveries: deliveries.clone(),
            tenants: parts.quotas.clone(),
            permits: parts.permits,
            status: status.clone(),
        },
    )?;
    let catalog = parts.catalog;
    // Webhooks the journal kept for destinations no longer configured (or
    // deleted through the admin API) have nowhere to go: dead-lettered now,
    // not one attempt at a time behind a breaker.
    let orphans: Vec<String> = built
        .set
        .all_stats()
        .iter()
        .filter(|st| catalog.target(st.name()).is_none())
        .map(|st| st.name().to_owned())
        .collect();
    for name in orphans {
        if let Some((stats, returned)) = built.set.remove(&name, std::time::Duration::ZERO).await {
            for job in returned {
                if sink.offer(job, "destination-unknown").is_err() {
                    tracing::error!(destination = %name, "the dead-letter writer is gone: a webhook for a destination no longer known was dropped");
                }
            }
            say!(
                "journal: {} webhooks for {name:?}, no longer a destination, dead-lettered",
                stats.dead_lettered() + stats.evicted()
            );
        }
    }
    let budget = parts.budget;
    let window = s.idempotency_window;
    // Opened only once the journal holds its directory's lock.
    let keys = match &built.journal {
        Some(journal) => Idempotency::open(journal, budget.clone(), window, idempotency::MAX_KEYS)
            .map_err(|e| {
                // Name the file: in a shared (sticky) directory the journal
                // may open while another user's keys file cannot be replaced.
                let file = journal.dir().join("idempotency.jsonl");
                format!("idempotency keys {}: {e}", file.display())
            })?,
        None => Idempotency::in_memory(budget.clone(), window, idempotency::MAX_KEYS),
    };
    match &parts.journal_dir {
        Some(dir) => say!(
            "journal {}: recovered {} unfinished webhooks, delivering them first",
            dir.display(),
            built.recovered
        ),
        None => say!("no journal: accepted webhooks live in memory only"),
    }
    // Opened once the journal holds its directory's lock (in memory
    // without one).
    let events =
        crate::events::EventStore::open(built.journal.as_ref().map(|j| j.dir())).map(Arc::new)?;
    let events_kept = events.clone();
    if let Some(state) = &parts.state {
        for (name, app) in state.apps()? {
            catalog.put_app(&name, app);
        }
    }
    let local = Arc::new(Local::new(local::Parts {
        built,
        sink,
        dead_letter_file: paths.dead_letter_file.clone(),
        keys,
        status,
        catalog,
        budget,
        stores: parts.stores,
        limits: Limits::local(cfg),
        changes: changes::Changes::new(
            parts.state,
            s.max_destinations.max(cfg.destinations.len()),
            s.shutdown_grace,
            deliveries,
            build::Caps::of(cfg),
        ),
        events: Some(events),
        quotas: parts.quotas,
        retry_max: s.retry_max,
    }));
    tokio::spawn(crate::events::retention::sweep(
        Arc::downgrade(&events_kept),
        s.event_retention,
        s.event_retention_bytes,
        crate::domain::job::unix_ms,
    ));
    // Copies of events a crash (or a stop) left on their way go out again.
    let again = local.send_pending()?;
    if again > 0 {
        say!("events: {again} copies on their way at the last stop sent again");
    }
    Ok(local)
}
