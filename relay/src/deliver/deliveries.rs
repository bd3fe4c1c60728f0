//! What every destination's deliveries share, and each destination's
//! [`HttpDownstream`] made from it by name; a destination gone (deleted
//! here or by another relay of the fleet) is forgotten in the same place,
//! once its last delivery has ended.

use std::sync::{Arc, Mutex};

use super::errors::Errors;
use super::latency::Latencies;
use super::recent::Recents;
use super::{HttpDownstream, client, guard, target};
use crate::status::Registry;

/// The parts each destination's deliveries share.
pub(crate) struct Deliveries {
    /// The shared client.
    pub client: client::Client,
    /// The destinations in force.
    pub targets: Arc<dyn target::Targets>,
    /// Where delivery latencies go.
    pub latencies: Arc<Latencies>,
    /// Each destination's recent latencies.
    pub recents: Arc<Recents>,
    /// Where deliveries may connect.
    pub guard: Arc<guard::AddressGuard>,
    /// Where each attempt is recorded (local engine).
    pub status: Option<Arc<Registry>>,
    /// Where failed attempts are told.
    pub errors: Arc<Errors>,
    /// The tracer, with traces exported.
    pub traces: crate::trace::Shared,
    /// Retries after the first attempt.
    pub retries: u32,
    /// The longest wait between attempts (`retry_max`).
    pub retry_max: std::time::Duration,
}

impl Deliveries {
    /// `name`'s deliveries.
    pub(crate) fn of(&self, name: &str) -> HttpDownstream {
        HttpDownstream {
            client: self.client.clone(),
            name: Arc::from(name),
            targets: self.targets.clone(),
            latencies: self.latencies.clone(),
            recent: self.recents.of(name),
            guard: self.guard.clone(),
            status: self.status.clone(),
            errors: self.errors.clone(),
            traces: self.traces.clone(),
            retries: self.retries,
            retry_max: self.retry_max,
            held: Mutex::new(None),
        }
    }

    /// Forgets what `name`'s deliveries left (its last error, its recent
    /// latencies), once it is deleted and its drain has ended: one made
    /// again under the name starts with none of it.
    pub(crate) fn forget(&self, name: &str) {
        self.errors.forget(name);
        self.recents.forget(name);
    }
}
