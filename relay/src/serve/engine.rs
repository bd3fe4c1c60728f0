//! The engine, opened from the configuration: the one place the relay
//! asks which queue it runs (the local one, or the fleet's with `queue =
//! redis`). In two steps, because the admin API's changes are applied
//! over the configuration before it is checked:
//!
//! 1. [`Prepared::changes`]: the local engine's registry opened and
//!    applied, or the fleet's map read from Redis and applied (a demo keeps
//!    none);
//! 2. [`Prepared::open`]: the engine itself, from the checked
//!    configuration and the parts every engine shares.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Failure, Mode, local_prep, refused};
use crate::catalog::Catalog;
use crate::catalog::registry;
use crate::catalog::state;
use crate::config::value::QueueKind;
use crate::config::{Config, ConfigError, ConfigErrors, Origin};
use crate::deliver::deliveries::Deliveries;
use crate::deliver::guard::AddressGuard;
use crate::domain::budget::ByteBudget;
use crate::queue::local::Local;
use crate::queue::stores::StoreCheck;
use crate::queue::{Queue, backends};
use crate::status::Registry;

/// What an engine keeps of the admin API's changes, taken before the
/// configuration is checked.
pub(crate) enum Prepared {
    /// The local engine, with its registry (`None`: no state directory,
    /// or a demo).
    Local(Option<registry::Registry>),
    /// The local engine serving from a state directory that holds no
    /// registry yet: nothing to apply, and nothing made on disk until the
    /// configuration is checked (a refused start leaves no directory).
    LocalLater(PathBuf),
    /// The fleet's, with its map as read.
    Fleet(backends::FleetStart),
}

/// What every engine is opened with, besides the configuration.
pub(crate) struct Parts {
    /// The destinations in force.
    pub(crate) catalog: Arc<Catalog>,
    /// Each destination's deliveries, by name.
    pub(crate) deliveries: Arc<Deliveries>,
    /// Where deliveries may connect.
    pub(crate) guard: Arc<AddressGuard>,
    /// The tenant quota store, if tenants have quotas.
    pub(crate) quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
    /// The shared tenant quota store's check, if any.
    pub(crate) stores: Vec<StoreCheck>,
    /// Bytes held for clients.
    pub(crate) budget: ByteBudget,
    /// Every webhook's status ([`Prepared::statuses`]).
    pub(crate) status: Option<Arc<Registry>>,
}

/// An engine opened.
pub(crate) struct Engine {
    /// The queue, whichever engine keeps it.
    pub(crate) queue: Arc<dyn Queue>,
    /// The local engine itself, for the demos and `--redrive FILE`.
    pub(crate) local: Option<Arc<Local>>,
    /// The journal's directory (the local engine's; a demo's is its own).
    pub(crate) journal_dir: Option<PathBuf>,
}

impl Prepared {
    /// The admin API's changes over `cfg`'s destinations: the local
    /// engine's registry, or the fleet's map in Redis; none for a demo.
    pub(crate) async fn changes(cfg: &mut Config, mode: Mode) -> Result<Prepared, Failure> {
        let serving = mode == Mode::Serve;
        // A demo runs the local engine, and keeps no changes.
        if cfg.settings.queue == QueueKind::Redis && serving {
            for file in [registry::FILE, state::FILE] {
                if let Some(dir) = state::dir_of(cfg).filter(|d| d.join(file).exists()) {
                    tracing::warn!(file = %dir.join(file).display(), "with queue = redis the admin API's changes are the fleet's, in Redis: this relay's own registry is not read");
                }
            }
            return match backends::fleet_start(cfg).await {
                Ok(start) => Ok(Prepared::Fleet(start)),
                Err(backends::StartError::Failed(e)) => Err(Failure::Run(e)),
                Err(backends::StartError::Refused { key, why }) => {
                    Err(refused(key, cfg.origin(key).cloned(), why))
                }
            };
        }
        let file = match (serving, state::dir_of(cfg)) {
            (true, Some(dir))
                if !dir.join(registry::FILE).exists() && !dir.join(state::FILE).exists() =>
            {
                return Ok(Prepared::LocalLater(dir));
            }
            (true, Some(dir)) => {
                Some(registry::Registry::open(&dir, cfg).map_err(|e| match e {
                    registry::Opening::Failed(e) => Failure::Run(e),
                    registry::Opening::Refused(errors) => Failure::Config(ConfigErrors(errors)),
                })?)
            }
            _ => None,
        };
        if let Some(file) = &file {
            let errors = file.apply(cfg);
            if !errors.is_empty() {
                return Err(Failure::Config(ConfigErrors(errors)));
            }
        }
        Ok(Prepared::Local(file))
    }

    /// Whether the admin API changed the configured destinations (a
    /// registry that holds changes).
    pub(crate) fn changed(&self) -> bool {
        matches!(self, Prepared::Local(Some(registry)) if !registry.is_empty())
    }

    /// Whether this is the fleet's engine.
    pub(crate) fn is_fleet(&self) -> bool {
        matches!(self, Prepared::Fleet(_))
    }

    /// `errors` less those of destinations another relay of the fleet
    /// made that this one refuses: they do not stop it from starting, and
    /// are left out of `cfg` here (the rest of the fleet delivers them).
    pub(crate) fn excuse(&self, cfg: &mut Config, errors: &mut Vec<ConfigError>) {
        if !self.is_fleet() {
            return;
        }
        errors.retain(|e| {
            let Some(Origin::Fleet(_)) = &e.origin else {
                return true;
            };
            let Some(name) = e.key.strip_prefix("destinations.") else {
                return true;
            };
            tracing::error!(destination = %name, error = %e, "a destination the fleet's admin API made is refused here: left out on this relay");
            cfg.destinations
                .retain(|d| d.name != name || !matches!(d.origin, Origin::Fleet(_)));
            false
        });
    }

    /// Whether `--redrive FILE` can be done with this engine.
    pub(crate) fn check_redrive(&self, path: &Path, cfg: &Config) -> Result<(), Failure> {
        let flag = || Some(Origin::Flag("--redrive".into()));
        crate::dead_letter::redrive::check_source(path, &cfg.paths.dead_letter_file)
            .map_err(|e| refused("redrive", flag(), e))?;
        if self.is_fleet() {
            return Err(refused(
                "redrive",
                flag(),
                "with queue = redis dead letters live in Redis and are redriven through the \
                 admin API (POST /v1/dead-letters/redrive), not from a file",
            ));
        }
        Ok(())
    }

    /// The origin a destination made through the admin API names: the
    /// registry, or the fleet's map.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            Prepared::Fleet(_) => Origin::Fleet("dripfeed:map:{webhook_relay:destinations}".into()),
            Prepared::Local(file) => {
                Origin::Api(crate::queue::local::changes::state_path(file).into())
            }
            Prepared::LocalLater(dir) => Origin::Api(dir.join(registry::FILE).into()),
        }
    }

    /// The relay's own record of webhook statuses: the local engine's (the
    /// fleet keeps them in Redis, by its scripts).
    pub(crate) fn statuses(&self, cfg: &Config) -> Option<Arc<Registry>> {
        let s = &cfg.settings;
        matches!(self, Prepared::Local(_) | Prepared::LocalLater(_)).then(|| {
            Arc::new(Registry::new(
                s.status_retention,
                s.status_max,
                cfg.tenants.iter().map(|t| t.name.as_str()),
            ))
        })
    }

    /// The engine, opened from the checked `cfg`.
    pub(crate) async fn open(
        self,
        cfg: &Config,
        mode: Mode,
        parts: Parts,
    ) -> Result<Engine, Failure> {
        let s = &cfg.settings;
        match self {
            Prepared::Fleet(start) => {
                let fleet = backends::FleetParts {
                    catalog: parts.catalog,
                    deliveries: parts.deliveries,
                    guard: parts.guard,
                    quotas: parts.quotas,
                    stores: parts.stores,
                };
                Ok(Engine {
                    queue: backends::open_fleet(cfg, start, fleet).await?,
                    local: None,
                    journal_dir: None,
                })
            }
            Prepared::LocalLater(dir) => {
                // Checked: the registry is made now.
                let file = registry::Registry::open(&dir, cfg).map_err(|e| match e {
                    registry::Opening::Failed(e) => Failure::Run(e),
                    registry::Opening::Refused(errors) => Failure::Config(ConfigErrors(errors)),
                })?;
                Box::pin(Prepared::Local(Some(file)).open(cfg, mode, parts)).await
            }
            Prepared::Local(state) => {
                let journal_dir = match (s.no_journal, mode) {
                    (true, _) => None,
                    // One demo never replays into the next.
                    (false, Mode::Demo) => Some(std::env::temp_dir().join(format!(
                        "dripfeed-relay-demo-journal-{}",
                        std::process::id()
                    ))),
                    (false, _) => Some(cfg.paths.journal_dir.clone()),
                };
                let local = local_prep::Parts {
                    journal_dir: journal_dir.clone(),
                    state,
                    catalog: parts.catalog,
                    status: parts.status.unwrap_or_else(|| {
                        Arc::new(Registry::new(s.status_retention, s.status_max, []))
                    }),
                    deliveries: parts.deliveries,
                    quotas: parts.quotas,
                    stores: parts.stores,
                    permits: backends::fleet_permits(s).await?,
                    budget: parts.budget,
                };
                let local = local_prep::open(cfg, local).await?;
                Ok(Engine {
                    queue: local.clone() as Arc<dyn Queue>,
                    local: Some(local),
                    journal_dir,
                })
            }
        }
    }
}
