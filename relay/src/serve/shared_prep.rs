//! With `queue = redis`: the fleet's queues opened and this relay's drains
//! started ([`crate::queue::shared`]); otherwise nothing.

#![cfg(feature = "redis")]

use std::sync::Arc;

use super::Failure;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::config::value::QueueKind;
use crate::deliver::guard::AddressGuard;
use crate::deliver::latency::Latencies;
use crate::deliver::{self, HttpDownstream};
use crate::queue::shared::{Drains, Shared};

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

/// The shared queues, their drains started, or none.
pub(super) async fn open(
    cfg: &Config,
    catalog: &Arc<Catalog>,
    latencies: &Arc<Latencies>,
    guard: &Arc<AddressGuard>,
    quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
) -> Result<Option<Arc<Shared>>, Failure> {
    let s = &cfg.settings;
    if s.queue != QueueKind::Redis {
        return Ok(None);
    }
    let node = node_name(cfg);
    let shared = Shared::open(cfg, &node, quotas).await?;
    let client = deliver::client::client(s, s.max_in_flight, guard.clone())?;
    let (catalog, latencies, guard) = (catalog.clone(), latencies.clone(), guard.clone());
    let downstream = Arc::new(move |name: &str| HttpDownstream {
        client: client.clone(),
        name: Arc::from(name),
        targets: catalog.clone(),
        latencies: latencies.clone(),
        guard: guard.clone(),
        // Statuses are kept in Redis, by the queue's scripts.
        status: None,
    });
    shared.spawn(Drains { downstream });
    println!("shared queue in Redis as node {node}: webhooks wait in the fleet's streams");
    Ok(Some(Arc::new(shared)))
}
