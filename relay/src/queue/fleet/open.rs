//! The fleet's engine opened: the queues of the destinations in force (the
//! fleet's changes read at start applied over the configuration), this
//! relay's drains started, the fleet's changes followed.

use std::sync::Arc;

use dripfeed::keyed::BucketStore;

use super::FleetQueue;
use super::changes::{Fleet, Start};
use super::shared::{Drains, Shared};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::deliver::deliveries::Deliveries;
use crate::deliver::guard::AddressGuard;
use crate::domain::limits::Limits;
use crate::queue::stores::StoreCheck;

/// This relay's name in the shared queue: `node_name`, else the host's name
/// and the listen port.
fn node_name(cfg: &Config) -> String {
    let s = &cfg.settings;
    if let Some(name) = &s.node_name {
        return name.clone();
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "relay".to_owned());
    format!("{host}:{}", s.listen.port())
}

/// What the fleet's engine is opened with, besides the configuration.
pub(crate) struct Parts {
    /// The fleet's changes, read at start.
    pub start: Start,
    /// The destinations in force.
    pub catalog: Arc<Catalog>,
    /// Each destination's deliveries, by name.
    pub deliveries: Arc<Deliveries>,
    /// Where deliveries may connect (a destination the fleet makes is
    /// checked against it).
    pub guard: Arc<AddressGuard>,
    /// The tenant quota store, if tenants have quotas.
    pub quotas: Option<Arc<dyn BucketStore>>,
    /// The shared tenant quota store's check, if any.
    pub stores: Vec<StoreCheck>,
    /// Whether Redis keeps what it acknowledged, checked at start.
    pub durability: Arc<super::durability::Watch>,
}

/// The engine, its drains started.
pub(crate) async fn open(cfg: &Config, parts: Parts) -> Result<Arc<FleetQueue>, String> {
    let s = &cfg.settings;
    let node = node_name(cfg);
    parts.durability.spawn();
    let shared = Arc::new(Shared::open(cfg, &node, parts.quotas).await?);
    shared.spawn(Drains {
        downstream: parts.deliveries,
    });
    // Drains start with work, and sleep without.
    tokio::spawn(super::wake::listen(Arc::downgrade(&shared)));
    say!("shared queue in Redis as node {node}: webhooks wait in the fleet's streams");
    let limits = Limits::fleet(cfg);
    let changes = Fleet::start(
        parts.start,
        shared.clone(),
        parts.catalog.clone(),
        parts.guard,
        s.resolve_destinations_at_start,
        limits,
    )
    .await;
    let queue = Arc::new(FleetQueue {
        shared,
        changes,
        catalog: parts.catalog,
        limits,
        stores: parts.stores,
        durability: parts.durability,
        max_destinations: s.max_destinations.max(cfg.destinations.len()),
        grace: s.shutdown_grace,
        fanning: Arc::new(tokio::sync::Semaphore::new(super::events::FAN_OUTS)),
    });
    // Fan-outs a relay left unfinished (it died) are made by the others.
    tokio::spawn(super::events::sweep(Arc::downgrade(&queue)));
    Ok(queue)
}
