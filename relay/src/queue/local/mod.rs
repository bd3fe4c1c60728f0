//! The local engine: one relay's queue. The library's destinations set
//! (one leaky bucket per destination, with its journal), the dead-letter
//! file beside it, the idempotency keys and webhook statuses kept in the
//! relay (beside the journal when it has one), and the admin API's changes
//! in the registry.
//!
//! - [`build`]: the set made from the configuration;
//! - [`changes`]: `PUT` and `DELETE` of a destination, kept in the registry;
//! - [`letters`]: the dead-letter files paged and redriven (the admin API
//!   and `--redrive FILE`);
//! - [`idempotency`]: the keys, scoped by tenant, each naming its request.

pub(crate) mod build;
pub(crate) mod changes;
pub(crate) mod events;
pub(crate) mod idempotency;
pub(crate) mod letters;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::destinations::{DestinationStats, Destinations};
use dripfeed::journal::{Health, Journal};
use dripfeed::{Cause as LibCause, Reason, Rejected, Submission, headers};

use super::contract::{
    Accepted, Admission, Cause, ChangeRefused, Changed, Drained, LetterError, LetterPage,
    LetterQuery, Queue, Redrive, Redriven, Refusal, Store,
};
use super::stores::StoreCheck;
use crate::catalog::Catalog;
use crate::catalog::edit::{Edit, Precondition};
use crate::catalog::vet::Vetter;
use crate::config::{Destination, Fields};
use crate::dead_letter::FileSink;
use crate::dead_letter::health::Unavailable;
use crate::domain::budget::ByteBudget;
use crate::domain::job::{Job, unix_ms};
use crate::domain::limits::Limits;
use crate::domain::schemas::{Deleting, Live};
use crate::status::{Found, Registry};
use crate::telemetry;
use idempotency::{Begin, Idempotency, body_hash};

/// The local engine (see the [module](self) docs).
pub(crate) struct Local {
    /// The destinations set (the demos drive it).
    pub set: Destinations<Job>,
    /// The journal, holding its directory's lock (`None`: memory only).
    journal: Option<Journal>,
    /// The dead-letter file.
    pub sink: Arc<FileSink>,
    /// The live dead-letter file's path (its rotated ones beside it).
    dead_letter_file: PathBuf,
    keys: Idempotency,
    status: Arc<Registry>,
    catalog: Arc<Catalog>,
    budget: ByteBudget,
    /// The shared tenant quota store `/readyz` asks, if any.
    stores: Vec<StoreCheck>,
    limits: Limits,
    changes: changes::Changes,
    /// Held by the redrive running.
    redriving: tokio::sync::Mutex<()>,
    /// The events store (`None`: this relay keeps no events).
    events: Option<Arc<crate::events::EventStore>>,
    /// The tenant quota store an event is charged in, once.
    quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
    /// `retry_max`: the longest a copy sent again at a start waits for its
    /// receiver's `Retry-After`.
    retry_max: std::time::Duration,
}

/// What the engine is made of, besides its set.
pub(crate) struct Parts {
    /// The set, its journal and what was recovered.
    pub built: build::Built,
    /// The dead-letter file.
    pub sink: Arc<FileSink>,
    /// `dead_letter_file`.
    pub dead_letter_file: PathBuf,
    /// The idempotency keys.
    pub keys: Idempotency,
    /// Every webhook's status.
    pub status: Arc<Registry>,
    /// The destinations in force.
    pub catalog: Arc<Catalog>,
    /// Bytes held for clients.
    pub budget: ByteBudget,
    /// The shared tenant quota store's check, if any.
    pub stores: Vec<StoreCheck>,
    /// What a destination must fit.
    pub limits: Limits,
    /// The admin API's changes and where they are kept.
    pub changes: changes::Changes,
    /// The events store.
    pub events: Option<Arc<crate::events::EventStore>>,
    /// The tenant quota store, if tenants have quotas.
    pub quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
    /// `retry_max`.
    pub retry_max: std::time::Duration,
}

impl Local {
    /// The engine of `parts`.
    pub(crate) fn new(parts: Parts) -> Local {
        Local {
            set: parts.built.set,
            journal: parts.built.journal,
            sink: parts.sink,
            dead_letter_file: parts.dead_letter_file,
            keys: parts.keys,
            status: parts.status,
            catalog: parts.catalog,
            budget: parts.budget,
            stores: parts.stores,
            limits: parts.limits,
            changes: parts.changes,
            redriving: tokio::sync::Mutex::new(()),
            events: parts.events,
            quotas: parts.quotas,
            retry_max: parts.retry_max,
        }
    }

    /// A refusal of the set's, as the contract says it.
    fn refusal(&self, destination: &str, r: Rejected<Job>) -> Refusal {
        let fields = headers::for_rejected(&r);
        let cause = match r.reason() {
            Reason::Overloaded => Cause::Full,
            Reason::OverQuota => Cause::OverQuota,
            // Deleted while this one was on its way in: as if it never existed.
            Reason::Closed if !self.catalog.is_open(destination) => Cause::Gone,
            Reason::Closed => Cause::Closed,
            Reason::Unavailable {
                cause: LibCause::JournalFull,
            } => Cause::Unavailable(Store::JournalFull),
            Reason::Unavailable {
                cause: LibCause::JournalFailed,
            } => Cause::Unavailable(Store::JournalFailed),
            Reason::Unavailable { .. } => Cause::Unavailable(Store::Quotas),
            _ => Cause::Invalid,
        };
        Refusal { cause, fields }
    }
}

impl Local {
    /// How long until the queues have room again, roughly.
    pub(crate) fn drain_wait_now(&self) -> Duration {
        let (depth, rate) = self
            .set
            .active_stats()
            .iter()
            .fold((0u64, 0.0f64), |(d, r), s| {
                (d + s.depth(), r + s.drain_rate())
            });
        match rate > 0.0 {
            true => Duration::from_secs_f64((depth as f64 / rate).min(3600.0)),
            false => Duration::from_secs(1),
        }
    }
}

/// A destination's stats as the admin API shows them.
pub(crate) fn live_of(s: &DestinationStats) -> Live {
    Live {
        active: s.is_active(),
        rate_now: s.drain_rate(),
        depth: s.depth(),
        capacity: s.capacity(),
        in_flight: s.in_flight(),
        held: s.held(),
        breaker: s.breaker().as_str().to_owned(),
        accepted: s.accepted(),
        refused: s.refused(),
        delivered: s.delivered(),
        dead_lettered: s.dead_lettered() + s.evicted(),
    }
}

#[async_trait::async_trait]
impl Queue for Local {
    fn not_keeping(&self) -> Option<Unavailable> {
        self.sink.health().unavailable()
    }

    fn drain_wait(&self) -> Duration {
        self.drain_wait_now()
    }

    fn events(&self) -> &dyn crate::queue::events::Events {
        self
    }

    fn make_room(&self, bytes: u64) {
        self.keys.make_room(bytes);
    }

    async fn admit(&self, a: Admission) -> Result<Accepted, Refusal> {
        let Admission {
            destination,
            tenant,
            key,
            charged,
            job,
        } = a;
        // The idempotency key, scoped by the tenant: a repeat answers here.
        if let Some(key) = &key {
            let begun = self
                .keys
                .begin(tenant.scope(), key, &destination, body_hash(&job.body));
            match begun {
                Begin::New => {}
                Begin::Repeat(id) => return Ok(Accepted::Duplicate(id)),
                Begin::Conflict => return Err(Refusal::now(Cause::KeyReused)),
                Begin::InProgress => return Err(Refusal::now(Cause::KeyInProgress)),
                Begin::NoRoom => return Err(Refusal::after(Cause::NoRoom, self.drain_wait())),
            }
        }
        let trail = job.trail.clone();
        // The tenant's quota is charged inside the set's admission (and given
        // back when the queue refuses); with a journal both answer once the
        // webhook is durable.
        let admitted = match charged {
            true => {
                self.set
                    .submit_timeout(
                        &destination,
                        Submission::new(job).key(tenant.scope(), 1.0),
                        Duration::ZERO,
                    )
                    .await
            }
            false => {
                self.set
                    .submit_timeout(&destination, job, Duration::ZERO)
                    .await
            }
        };
        let admitted = match admitted {
            Ok(a) => a,
            Err(r) => {
                if let Some(key) = &key {
                    self.keys.refused(tenant.scope(), key);
                }
                return Err(self.refusal(&destination, r));
            }
        };
        let public = trail.name(admitted.id());
        self.status
            .queued(public, tenant.named.as_deref(), &destination, unix_ms());
        if let Some(key) = &key
            && let Err(e) = self.keys.accepted(tenant.scope(), key, admitted.id()).await
        {
            // The webhook itself is durable; only a repeat after a restart
            // could be taken as new.
            tracing::warn!(error = %e, "idempotency key not stored");
        }
        Ok(match admitted.is_deferred() {
            true => Accepted::Deferred(admitted.id()),
            false => Accepted::Queued(admitted.id()),
        })
    }

    async fn status(&self, id: u64) -> Result<Option<Found>, String> {
        Ok(self.status.find(id, unix_ms()))
    }

    async fn live(&self, name: &str) -> Option<Live> {
        self.set.stats(name).map(|s| live_of(&s))
    }

    fn busiest(&self, k: usize) -> Vec<(String, u64)> {
        self.set.busiest(k)
    }

    async fn current(&self, name: &str) -> Result<Option<Fields>, ChangeRefused> {
        Ok(changes::Changes::current(&self.catalog, name))
    }

    async fn change(
        &self,
        name: &str,
        edit: Edit,
        pre: &Precondition,
        vet: &Vetter,
    ) -> Result<Changed, ChangeRefused> {
        self.changes
            .change(
                &self.set,
                &self.catalog,
                name,
                edit,
                pre,
                (vet, &self.limits),
            )
            .await
    }

    async fn delete(&self, name: &str, pre: &Precondition) -> Result<Deleting, ChangeRefused> {
        self.changes
            .delete(
                &self.set,
                &self.catalog,
                &self.sink,
                name,
                pre,
                "destination-deleted",
            )
            .await
    }

    async fn reconfigure(
        &self,
        changes: Vec<(String, Option<Destination>)>,
    ) -> Result<Vec<String>, ChangeRefused> {
        self.changes
            .reconfigure(&self.set, &self.catalog, &self.sink, changes)
            .await
    }

    async fn dead_letters(&self, query: LetterQuery) -> Result<LetterPage, LetterError> {
        letters::page(&self.dead_letter_file, query).await
    }

    async fn redrive(&self, what: Redrive, most: usize) -> Result<Redriven, LetterError> {
        let _one_at_a_time = self.redriving.lock().await;
        letters::redrive(self, what, most).await
    }

    async fn down(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        match self.journal.as_ref().map(Journal::health) {
            Some(Health::Gone) => out.push((
                "journal",
                "the journal's directory is gone or not writable: every webhook is refused (503)"
                    .to_owned(),
            )),
            Some(Health::WritesFailing) => out.push((
                "journal",
                "the journal cannot write (a full disk, an I/O error): webhooks are refused \
                 (503) until a write succeeds"
                    .to_owned(),
            )),
            Some(Health::CannotRoll) => out.push((
                "journal",
                "the journal's directory takes no new file: webhooks are still kept, in a \
                 segment growing past its size, until a new one can be started"
                    .to_owned(),
            )),
            _ => {}
        }
        if let Some(why) = self.not_keeping() {
            out.push(("dead-letter", format!("{}: {}", why.kind, why.detail)));
        }
        for store in &self.stores {
            if let Some(why) = store.down().await {
                out.push((store.name, why));
            }
        }
        out
    }

    async fn publish(&self) {
        // Each throttle's gauges from a reading taken now: a drain waiting
        // for a free delivery (a receiver that hangs) does not tick, and
        // its depth gauge would read what it was before the queue grew.
        let _ = self.set.active_stats();
        metrics::gauge!(telemetry::IDEMPOTENCY_KEYS).set(self.keys.count() as f64);
        let (held, ended) = self.status.counts();
        metrics::gauge!(telemetry::WEBHOOK_STATUSES, "kind" => "held").set(held as f64);
        metrics::gauge!(telemetry::WEBHOOK_STATUSES, "kind" => "ended").set(ended as f64);
        metrics::gauge!(telemetry::WEBHOOK_STATUS_BYTES).set(self.status.bytes() as f64);
    }

    async fn shutdown(&self, grace: Duration) -> Drained {
        // One grace for all of it: deletions still draining and the set
        // deliver what they hold until the same deadline, and what they
        // dead-letter is in the file before it is flushed.
        let until = tokio::time::Instant::now() + grace;
        let deletions = async {
            if tokio::time::timeout_at(until, self.catalog.finish())
                .await
                .is_err()
            {
                tracing::warn!(
                    "a deleted destination was still draining at the end of the grace; the journal keeps what it held"
                );
            }
        };
        // The set closes to new webhooks at once, and both drain together.
        let ((), (stats, returned)) = tokio::join!(deletions, self.set.shutdown(grace));
        for (name, job) in returned {
            job.trail.tried_by(&name.into());
            if self.sink.offer(job, "shutdown").is_err() {
                tracing::error!(
                    "the dead-letter writer is gone: a webhook left at shutdown was dropped"
                );
            }
        }
        let flushed = self.sink.flushed().await;
        Drained {
            delivered: stats.iter().map(|s| s.delivered()).sum(),
            kept: stats.iter().map(|s| s.kept()).sum(),
            dead_letter_lines: flushed.written,
            dead_letter_held: flushed.held,
            // Every end of the drain written beside the journal before exiting.
            statuses_unwritten: self.status.finish().await,
        }
    }
}
