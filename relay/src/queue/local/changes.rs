//! `PUT`, `PATCH` and `DELETE` of a destination in the local engine:
//! written to the registry ([`crate::catalog::registry`]) before the
//! answer, so a restart keeps them. One change of a name runs at a time,
//! from the read of the destination it changes to its write, under the
//! name's lock (one of [`STRIPES`], by the name's hash; a change is written
//! first and taken back if the set then refuses it): a change answered is
//! never undone by another, and a `PATCH` never makes again what a `DELETE`
//! took. Changes of other names go on meanwhile, and those written together
//! share the registry's fsync. A reload takes every name's lock. Without a
//! registry (`no_journal` without `state_dir`) all answer 409.
//!
//! - `PUT` makes the destination or replaces it whole. A new rate, ceiling
//!   or budget applies at once to an active destination whose ring holds a
//!   full budget at it (else 422, nothing changed); the URL and secrets
//!   apply from the next attempt.
//! - `DELETE` closes it to new webhooks at once (404 from then), lets it
//!   deliver what it holds within the shutdown grace, then dead-letters
//!   the rest: never lost.

use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

use dripfeed::destinations::{DestinationError, Destinations};

use super::build::Caps;
use crate::catalog::Catalog;
use crate::catalog::edit::{Edit, Precondition, app_etag, etag, resolve};
use crate::catalog::registry::Registry;
use crate::catalog::vet::Vetter;
use crate::config::{Destination, Fields};
use crate::dead_letter::FileSink;
use crate::deliver::deliveries::Deliveries;
use crate::domain::job::Job;
use crate::domain::limits::Limits;
use crate::domain::schemas::Deleting;
use crate::queue::contract::{ChangeRefused, Changed, Put};

const NO_STATE: &str = "this relay has no registry (no_journal without state_dir): \
                        a change would not survive a restart; give state_dir";

/// How many locks the names are spread over.
pub(crate) const STRIPES: usize = 64;

/// The admin API's changes of the local engine.
pub(crate) struct Changes {
    /// Where the changes are kept (`None`: no state directory, changes
    /// refused).
    registry: Option<Registry>,
    /// One change of a name at a time: each name's lock is one of these.
    stripes: Box<[Mutex<()>]>,
    /// One change of an application's membership at a time: its `PUT`, its
    /// `DELETE` (every endpoint of it, then itself) and the change of any
    /// endpoint of it hold its lock, taken before a name's (so an endpoint
    /// is never made for an application being deleted, nor left behind).
    apps: Box<[Mutex<()>]>,
    seed: RandomState,
    /// New destinations being made now, counted against `max_destinations`
    /// before they are in the catalog.
    making: AtomicUsize,
    /// `max_destinations`.
    max_destinations: usize,
    /// How long a deleted destination may still deliver (`shutdown_grace`).
    grace: Duration,
    /// What a deleted destination's deliveries leave, forgotten once its
    /// last delivery has ended.
    deliveries: Arc<Deliveries>,
    /// Each destination's deliveries at once, as at the start.
    caps: Caps,
}

/// An application's lock, held ([`Changes::app_turn`]).
pub(crate) struct AppTurn<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

/// The registry's path, as a destination made here names its origin.
pub(crate) fn state_path(registry: &Option<Registry>) -> PathBuf {
    registry
        .as_ref()
        .map_or_else(Default::default, |r| r.path().to_owned())
}

/// A place among the destinations being made, given back when dropped.
struct Making<'a>(Option<&'a AtomicUsize>);

impl Drop for Making<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The library's refusal of a destination's settings.
fn refused(e: DestinationError) -> ChangeRefused {
    match e {
        DestinationError::Unnamed => ChangeRefused::new(
            409,
            "destination-busy",
            "webhooks from before (of a destination of that name no longer configured) \
             are still being dead-lettered; retry shortly",
        ),
        DestinationError::Closed => ChangeRefused::closing(),
        e @ DestinationError::AboveMax { .. } => ChangeRefused::new(
            422,
            "bad-destination",
            format!(
                "{e}: a rate is at most the destination's own ceiling (raise it in the same \
                 change), and both at most the relay's highest rate, fixed at start: `ceiling` \
                 with `adaptive`, else the highest `drain_rate`, `rate` or `ceiling` configured"
            ),
        ),
        e => ChangeRefused::new(422, "bad-destination", e.to_string()),
    }
}

fn unwritable(e: String) -> ChangeRefused {
    ChangeRefused::new(
        503,
        "state-unwritable",
        format!("the registry cannot be written, nothing changed: {e}"),
    )
}

impl Changes {
    /// The changes kept in `registry`, within `max_destinations`.
    pub(crate) fn new(
        registry: Option<Registry>,
        max_destinations: usize,
        grace: Duration,
        deliveries: Arc<Deliveries>,
        caps: Caps,
    ) -> Changes {
        Changes {
            registry,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            apps: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            seed: RandomState::new(),
            making: AtomicUsize::new(0),
            max_destinations,
            grace,
            deliveries,
            caps,
        }
    }

    /// `name`'s lock.
    async fn turn(&self, name: &str) -> MutexGuard<'_, ()> {
        let i = self.seed.hash_one(name) as usize % self.stripes.len();
        self.stripes[i].lock().await
    }

    /// Application `app`'s lock (taken before any name's).
    pub(crate) async fn app_turn(&self, app: &str) -> AppTurn<'_> {
        let i = self.seed.hash_one(app) as usize % self.apps.len();
        AppTurn(self.apps[i].lock().await)
    }

    /// Every name's lock, in order (a reload's).
    async fn every_turn(&self) -> Vec<MutexGuard<'_, ()>> {
        let mut all = Vec::with_capacity(self.stripes.len());
        for stripe in self.stripes.iter() {
            all.push(stripe.lock().await);
        }
        all
    }

    /// Whether a destination listed as `before` may be made or changed: not
    /// while it is being deleted (409, `then` saying what happens after), and
    /// a new one only below `max_destinations` (422), its place held while
    /// it is made.
    fn may_make(
        &self,
        catalog: &Catalog,
        before: Option<&crate::catalog::Listed>,
        then: &str,
    ) -> Result<Making<'_>, ChangeRefused> {
        match before {
            Some(l) if !l.open => {
                let detail = format!("it is being deleted; {then}");
                Err(ChangeRefused::new(409, "destination-deleting", detail))
            }
            None => {
                let making = self.making.fetch_add(1, Ordering::AcqRel) + 1;
                let held = Making(Some(&self.making));
                if catalog.held() + making > self.max_destinations {
                    let detail = format!(
                        "the relay holds its {} destinations (max_destinations)",
                        self.max_destinations
                    );
                    return Err(ChangeRefused::new(422, "too-many-destinations", detail));
                }
                Ok(held)
            }
            Some(_) => Ok(Making(None)),
        }
    }

    /// `name`'s fields as kept now (`None`: it does not exist, or is
    /// being deleted).
    pub(crate) fn current(catalog: &Catalog, name: &str) -> Option<Fields> {
        catalog
            .get(name)
            .filter(|l| l.open)
            .map(|l| l.dest.fields())
    }

    /// Makes or changes `name` by `edit`: read, resolved, checked and
    /// written under the name's lock, so no other change comes
    /// between the value the edit is resolved against and the write.
    pub(crate) async fn change(
        &self,
        set: &Destinations<Job>,
        catalog: &Catalog,
        name: &str,
        edit: Edit,
        pre: &Precondition,
        vet: (&Vetter, &Limits),
    ) -> Result<Changed, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        // The application it names (a PATCH keeps its own): its lock first.
        let app = match &edit {
            Edit::Replace(r) => r.fields.application.clone(),
            Edit::Merge(_) => Self::current(catalog, name).and_then(|f| f.application),
        };
        let _app_turn = match &app {
            Some(a) => Some(self.app_turn(a).await),
            None => None,
        };
        let _turn = self.turn(name).await;
        let Some(registry) = &self.registry else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        if catalog.is_closing() {
            return Err(ChangeRefused::closing()); // shutdown began meanwhile
        }
        let before = catalog.get(name);
        let current = Self::current(catalog, name);
        // Deleted and made again under another application meanwhile: the
        // lock held is not its application's.
        if matches!(edit, Edit::Merge(_))
            && let Some(now) = &current
            && now.application != app
        {
            return Err(ChangeRefused::new(
                409,
                "destination-changed",
                "it was made again meanwhile: read it and retry",
            ));
        }
        // A PATCH of a destination being deleted, or gone, is never a make
        // (one conditional on its tag: 412, as the tag no longer holds).
        if matches!(edit, Edit::Merge(_)) && current.is_none() {
            return Err(match pre.holds(None) {
                true => ChangeRefused::unknown(),
                false => ChangeRefused::precondition(),
            });
        }
        let fields = resolve(name, current.as_ref(), edit, pre)?;
        if let Some(now) = &current
            && now.application != fields.application
        {
            return Err(ChangeRefused::application_fixed());
        }
        // An endpoint only of an application that exists (not one deleted
        // while this change waited for its lock).
        if let Some(a) = &fields.application
            && catalog.app(a).is_none()
        {
            return Err(ChangeRefused::unknown_application());
        }
        let _making = self.may_make(
            catalog,
            before.as_ref(),
            "make it again once it has drained",
        )?;
        let dest = vet.0.vet(fields.clone(), vet.1).await?;
        // The registry first: if it cannot be written, nothing has changed;
        // if the set then refuses the change, the registry is put back.
        let prior = registry.kept(name).map_err(unwritable)?;
        registry.put(name, &fields).await.map_err(unwritable)?;
        if let Err(e) = set.define(name, self.caps.overrides(&dest)) {
            if let Err(undo_error) = registry.restore(name, prior).await {
                tracing::error!(destination = %name, error = %undo_error, "the registry keeps a change the relay refused: it applies at the next start");
            }
            return Err(refused(e));
        }
        tracing::info!(destination = %name, created = before.is_none(), "destination changed through the admin API");
        let etag = etag(&dest.fields());
        catalog.put(dest);
        Ok(Changed {
            put: match before {
                None => Put::Made,
                Some(_) => Put::Changed,
            },
            etag,
        })
    }

    /// Makes or replaces application `name` if `pre` holds, kept in the
    /// registry first: whether it is new, and it as kept.
    pub(crate) async fn put_app(
        &self,
        catalog: &Catalog,
        name: &str,
        app: crate::catalog::App,
        pre: &Precondition,
    ) -> Result<(bool, crate::catalog::App), ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let _turn = self.app_turn(name).await;
        let Some(registry) = &self.registry else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        let was = catalog.app(name);
        if !pre.holds(was.as_ref().map(app_etag).as_deref()) {
            return Err(ChangeRefused::precondition());
        }
        let made = was.is_none();
        let app = app.made_over(was.as_ref());
        registry.put_app(name, &app).await.map_err(unwritable)?;
        catalog.put_app(name, app.clone());
        Ok((made, app))
    }

    /// Forgets application `name` (its endpoints deleted before, under
    /// the application's lock, held).
    pub(crate) async fn delete_app(
        &self,
        catalog: &Catalog,
        name: &str,
        _held: AppTurn<'_>,
    ) -> Result<(), ChangeRefused> {
        let Some(registry) = &self.registry else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        if catalog.app(name).is_none() {
            return Err(ChangeRefused::unknown_application());
        }
        registry.delete_app(name).await.map_err(unwritable)?;
        catalog.remove_app(name);
        Ok(())
    }

    /// Deletes `name`: closed now, drained within the grace, the rest
    /// dead-lettered.
    pub(crate) async fn delete(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        name: &str,
        pre: &Precondition,
        why: &'static str,
    ) -> Result<Deleting, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let turn = self.turn(name).await;
        let Some(registry) = &self.registry else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        if catalog.is_closing() {
            return Err(ChangeRefused::closing()); // shutdown began meanwhile
        }
        let Some(current) = Self::current(catalog, name) else {
            return Err(ChangeRefused::unknown());
        };
        if !pre.holds(Some(&etag(&current))) {
            return Err(ChangeRefused::precondition());
        }
        registry.delete(name).await.map_err(unwritable)?;
        // Closed before the lock is let go: a change waiting for it finds
        // the destination gone, never open to be changed (and made again).
        let deleting = self.drain_away(set, catalog, sink, name, why);
        drop(turn);
        Ok(deleting)
    }

    /// The configured destinations a reload changes, all or none: each
    /// defined in the set (`Some`) or drained away (`None`), the registry
    /// untouched; a name the registry holds (the admin API's) is left as
    /// it is (returned). Every definition is checked (room, an active
    /// destination's ring) before any is applied, under every name's lock
    /// and while none of their throttles can start or stop.
    pub(crate) async fn reconfigure(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        changes: Vec<(String, Option<Destination>)>,
    ) -> Result<Vec<String>, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let turns = self.every_turn().await;
        let (kept, changes): (Vec<_>, Vec<_>) = changes
            .into_iter()
            .partition(|(name, _)| self.registry.as_ref().is_some_and(|r| r.holds(name)));
        let kept = kept.into_iter().map(|(name, _)| name).collect();
        let named = |name: &str, e: ChangeRefused| {
            ChangeRefused::new(e.status, e.kind, format!("{name}: {}", e.detail))
        };
        let mut made = 0;
        let mut defs = Vec::new();
        for (name, dest) in &changes {
            let Some(dest) = dest else { continue };
            let before = catalog.get(name);
            if before.is_none() {
                made += 1;
            }
            if before.is_some_and(|l| !l.open) {
                let detail =
                    "it is being deleted; it is made again by a reload once it has drained";
                return Err(named(
                    name,
                    ChangeRefused::new(409, "destination-deleting", detail),
                ));
            }
            defs.push((name.as_str(), self.caps.overrides(dest)));
        }
        if made > 0 && catalog.held() + made > self.max_destinations {
            let removing = changes.iter().filter(|(_, d)| d.is_none()).count();
            let detail = format!(
                "the relay holds {} destinations and the reload makes {made} more: more than \
                 max_destinations ({}); a destination being removed holds its place until it \
                 has drained ({removing} here): reload again once they have, or raise \
                 max_destinations",
                catalog.held(),
                self.max_destinations
            );
            return Err(ChangeRefused::new(422, "too-many-destinations", detail));
        }
        set.define_all(&defs)
            .map_err(|e| named(&e.destination, refused(e.error)))?;
        for (name, dest) in changes {
            match dest {
                Some(dest) => {
                    tracing::info!(destination = %name, "destination changed by a reload of the configuration");
                    catalog.put(dest);
                }
                None if catalog.is_open(&name) => {
                    self.drain_away(set, catalog, sink, &name, "destination-deleted");
                }
                None => {}
            }
        }
        drop(turns);
        Ok(kept)
    }

    /// Closes `name` at once (404 from then), lets it deliver what it
    /// holds within the grace, then dead-letters the rest.
    fn drain_away(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        name: &str,
        why: &'static str,
    ) -> Deleting {
        // From here intake gives no pass for it: new webhooks get 404.
        catalog.close(name);
        let held = set.stats(name).map_or(0, |s| s.held());
        let grace = self.grace;
        let (set, catalog2, sink, gone) =
            (set.clone(), catalog.clone(), sink.clone(), name.to_owned());
        let deliveries = self.deliveries.clone();
        sink.retiring(&Arc::from(name), why);
        let task = tokio::spawn(async move {
            // Admissions that picked it before it closed end first (each
            // admitted or refused), so none lands in a destination taken out.
            catalog2.admissions_done(&gone).await;
            // The throttle delivers within the grace, then dead-letters the
            // rest itself; anything handed back goes to the file too.
            if let Some((_, returned)) = set.remove(&gone, grace).await {
                for job in returned {
                    if sink.offer(job, why).is_err() {
                        tracing::error!(destination = %gone, "the dead-letter writer is gone: a webhook of a deleted destination was dropped");
                    }
                }
            }
            sink.retired(&gone);
            deliveries.forget(&gone);
            catalog2.forget(&gone);
            tracing::info!(destination = %gone, "deleted destination drained");
        });
        catalog.removing(task);
        tracing::info!(destination = %name, held, "destination deleted");
        Deleting {
            name: name.to_owned(),
            held,
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        }
    }
}
