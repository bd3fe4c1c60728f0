//! `PUT` and `DELETE` of a destination in the local engine: written to the
//! state file ([`crate::catalog::state`]) before the answer, so a restart
//! keeps them; one change runs at a time (a `PUT` is written first and
//! taken back if the set then refuses it). Without a state file
//! (`no_journal` without `state_dir`) both answer 409.
//!
//! - `PUT` makes the destination or replaces it whole. A new rate, ceiling
//!   or budget applies at once to an active destination whose ring holds a
//!   full budget at it (else 422, nothing changed); the URL and secrets
//!   apply from the next attempt.
//! - `DELETE` closes it to new webhooks at once (404 from then), lets it
//!   deliver what it holds within the shutdown grace, then dead-letters
//!   the rest: never lost.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::destinations::{DestinationError, Destinations};

use super::build::overrides;
use crate::catalog::Catalog;
use crate::catalog::state::StateFile;
use crate::config::{Destination, Fields};
use crate::dead_letter::FileSink;
use crate::domain::job::Job;
use crate::domain::schemas::Deleting;
use crate::queue::contract::{ChangeRefused, Put};

const NO_STATE: &str = "this relay has no state file (no_journal without state_dir): \
                        a change would not survive a restart; give state_dir";

/// The admin API's changes of the local engine.
pub struct Changes {
    /// The state file the changes go to (`None`: no state directory,
    /// changes refused); held by the change running.
    pub state: tokio::sync::Mutex<Option<StateFile>>,
    /// `max_destinations`.
    pub max_destinations: usize,
    /// How long a deleted destination may still deliver (`shutdown_grace`).
    pub grace: Duration,
}

/// The state file's path, as a destination made here names its origin.
pub fn state_path(state: &Option<StateFile>) -> PathBuf {
    state
        .as_ref()
        .map_or_else(Default::default, |f| f.path().to_owned())
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
        e => ChangeRefused::new(422, "bad-destination", e.to_string()),
    }
}

fn unwritable(e: std::io::Error) -> ChangeRefused {
    ChangeRefused::new(
        503,
        "state-unwritable",
        format!("the state file cannot be written, nothing changed: {e}"),
    )
}

impl Changes {
    /// Whether a destination listed as `before` may be made or changed: not
    /// while it is being deleted (409, `then` saying what happens after), and
    /// a new one only below `max_destinations` (422).
    fn may_make(
        &self,
        catalog: &Catalog,
        before: Option<&crate::catalog::Listed>,
        then: &str,
    ) -> Result<(), ChangeRefused> {
        match before {
            Some(l) if !l.open => {
                let detail = format!("it is being deleted; {then}");
                Err(ChangeRefused::new(409, "destination-deleting", detail))
            }
            None if catalog.held() >= self.max_destinations => {
                let detail = format!(
                    "the relay holds its {} destinations (max_destinations)",
                    self.max_destinations
                );
                Err(ChangeRefused::new(422, "too-many-destinations", detail))
            }
            _ => Ok(()),
        }
    }

    /// Makes or replaces `name` (`fields`, checked as `dest`).
    pub async fn put(
        &self,
        set: &Destinations<Job>,
        catalog: &Catalog,
        name: &str,
        fields: &Fields,
        dest: Destination,
    ) -> Result<Put, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let mut state = self.state.lock().await;
        let Some(file) = state.as_mut() else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        let before = catalog.get(name);
        self.may_make(
            catalog,
            before.as_ref(),
            "make it again once it has drained",
        )?;
        // The file first: if it cannot be written, nothing has changed; if
        // the set then refuses the change, the file is put back.
        let undo = file.undo_point();
        file.put(name, fields).map_err(unwritable)?;
        if let Err(e) = set.define(name, overrides(&dest)) {
            if let Err(undo_error) = file.restore(undo) {
                tracing::error!(destination = %name, error = %undo_error, "the state file keeps a change the relay refused: it applies at the next start");
            }
            return Err(refused(e));
        }
        tracing::info!(destination = %name, created = before.is_none(), "destination changed through the admin API");
        catalog.put(dest);
        Ok(match before {
            None => Put::Made,
            Some(_) => Put::Changed,
        })
    }

    /// Deletes `name`: closed now, drained within the grace, the rest
    /// dead-lettered.
    pub async fn delete(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        name: &str,
    ) -> Result<Deleting, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let mut state = self.state.lock().await;
        let Some(file) = state.as_mut() else {
            return Err(ChangeRefused::new(409, "no-state-file", NO_STATE));
        };
        if catalog.is_closing() {
            return Err(ChangeRefused::closing()); // shutdown began meanwhile
        }
        if !catalog.is_open(name) {
            return Err(ChangeRefused::unknown());
        }
        file.delete(name).map_err(unwritable)?;
        drop(state);
        Ok(self.drain_away(set, catalog, sink, name))
    }

    /// A configured destination changed by a reload: defined in the set
    /// (`Some`) or drained away (`None`), the state file untouched; a name
    /// the state file holds (the admin API's) is left as it is.
    pub async fn reconfigure(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        name: &str,
        dest: Option<Destination>,
    ) -> Result<bool, ChangeRefused> {
        if catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let state = self.state.lock().await;
        if state.as_ref().is_some_and(|f| f.holds(name)) {
            return Ok(false);
        }
        let before = catalog.get(name);
        let Some(dest) = dest else {
            if before.is_some_and(|l| l.open) {
                drop(state);
                self.drain_away(set, catalog, sink, name);
            }
            return Ok(true);
        };
        self.may_make(
            catalog,
            before.as_ref(),
            "it is made again by a reload once it has drained",
        )?;
        set.define(name, overrides(&dest)).map_err(refused)?;
        tracing::info!(destination = %name, created = before.is_none(), "destination changed by a reload of the configuration");
        catalog.put(dest);
        Ok(true)
    }

    /// Closes `name` at once (404 from then), lets it deliver what it
    /// holds within the grace, then dead-letters the rest.
    fn drain_away(
        &self,
        set: &Destinations<Job>,
        catalog: &Arc<Catalog>,
        sink: &Arc<FileSink>,
        name: &str,
    ) -> Deleting {
        // From here intake gives no pass for it: new webhooks get 404.
        catalog.close(name);
        let held = set.stats(name).map_or(0, |s| s.held());
        let grace = self.grace;
        let (set, catalog2, sink, gone) =
            (set.clone(), catalog.clone(), sink.clone(), name.to_owned());
        let task = tokio::spawn(async move {
            // Admissions that picked it before it closed end first (each
            // admitted or refused), so none lands in a destination taken out.
            catalog2.admissions_done(&gone).await;
            // The throttle delivers within the grace, then dead-letters the
            // rest itself; anything handed back goes to the file too.
            if let Some((_, returned)) = set.remove(&gone, grace).await {
                for job in returned {
                    if sink.offer(job, "destination-deleted").is_err() {
                        tracing::error!(destination = %gone, "the dead-letter writer is gone: a webhook of a deleted destination was dropped");
                    }
                }
            }
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
