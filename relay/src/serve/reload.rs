//! SIGHUP: the configuration read again, from the same `--config` file,
//! `--destinations` file, flags and `DRIPFEED_*` variables (flags and
//! variables keep winning over the file), and what can change in a running
//! process changed:
//!
//! - tenants and their keys, destinations and rates (`[[tenants]]`);
//! - the admin token (`admin_token_sha256`);
//! - the configured destinations, as a restart with the new file would
//!   make them (made, changed, or drained away and dead-lettered), each
//!   applied by the queue ([`Queue::reconfigure`]); a name the admin API
//!   changed stays as the API left it;
//! - the listeners' certificates (`tls_cert`, `admin_tls_cert` and their
//!   keys), read again: new connections get the new ones;
//! - the log filter (`log_filter`; `RUST_LOG`, when set, wins).
//!
//! A reload checks everything before it changes anything: a configuration
//! the start would refuse changes nothing, and each error is logged. A
//! setting that cannot change in a running process (a listen address, the
//! queue, the journal directory, …) is logged as needing a restart and left
//! as it runs. `dripfeed_relay_reloads_total{result}` counts reloads:
//! `applied` or `refused`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admin::Admin;
use crate::auth::tenants::Tenants;
use crate::config::{self, Config, Destination, SourceFlags};
use crate::deliver::guard::AddressGuard;
use crate::intake::Intake;
use crate::queue::Queue;
use crate::status::Registry;
use crate::telemetry::{self, RELOADS};
use crate::tls::server::{self as tls, Certs};

/// Settings a reload changes; every other one needs a restart.
const RELOADABLE: &[&str] = &[
    "admin_token_sha256",
    "log_filter",
    "tls_cert",
    "tls_key",
    "admin_tls_cert",
    "admin_tls_key",
];

/// What a reload reaches.
pub(crate) struct Reloader {
    /// Where the configuration came from.
    pub flags: SourceFlags,
    /// The configuration in force (its destinations as configured, before
    /// the admin API's changes).
    pub running: tokio::sync::Mutex<Config>,
    /// Tenants and their keys.
    pub intake: Arc<Intake>,
    /// The admin token.
    pub admin: Arc<Admin>,
    /// Configured destinations.
    pub queue: Arc<dyn Queue>,
    /// Destinations' addresses, checked as at start.
    pub guard: Arc<AddressGuard>,
    /// The listeners' certificates: intake's, the admin listener's.
    pub certs: [Option<Arc<Certs>>; 2],
    /// Statuses (the local engine's): tenants added own theirs.
    pub status: Option<Arc<Registry>>,
    /// Tenant quotas, when tenants have them.
    pub quotas: Option<Arc<dyn dripfeed::keyed::BucketStore>>,
}

/// What a reload did.
#[derive(Debug, Default)]
pub(crate) struct Reloaded {
    /// Settings that changed and need a restart (left as they run).
    pub need_restart: Vec<&'static str>,
    /// Destinations made, changed and removed.
    pub destinations: (usize, usize, usize),
    /// Tenants and keys in force.
    pub tenants: (usize, usize),
}

impl Reloader {
    /// Reloads on every SIGHUP until the process ends.
    pub(crate) fn spawn(self: Arc<Self>, mut hangups: crate::shutdown::Hangups) {
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the configuration");
                let _ = self.reload().await;
            }
        });
    }

    /// One reload: logged and counted; the errors if it was refused.
    pub(crate) async fn reload(&self) -> Result<Reloaded, Vec<String>> {
        let result = self.try_reload().await;
        let label = match &result {
            Ok(done) => {
                for key in &done.need_restart {
                    tracing::warn!(
                        key,
                        "changed in the configuration, but needs a restart: left as it runs"
                    );
                }
                let (made, changed, removed) = done.destinations;
                tracing::info!(
                    tenants = done.tenants.0,
                    keys = done.tenants.1,
                    destinations_made = made,
                    destinations_changed = changed,
                    destinations_removed = removed,
                    "configuration reloaded"
                );
                "applied"
            }
            Err(errors) => {
                for e in errors {
                    tracing::error!(error = %e, "reload refused");
                }
                tracing::error!(
                    errors = errors.len(),
                    "the configuration was not reloaded: nothing changed"
                );
                "refused"
            }
        };
        metrics::counter!(RELOADS, "result" => label).increment(1);
        result
    }

    async fn try_reload(&self) -> Result<Reloaded, Vec<String>> {
        let text = |errors: Vec<config::ConfigError>| -> Vec<String> {
            errors.iter().map(ToString::to_string).collect()
        };
        let mut new = config::from_process(self.flags.clone()).map_err(|e| text(e.0))?;
        let mut running = self.running.lock().await;
        let mut done = Reloaded::default();
        // What cannot change here is kept as it runs, and said.
        let mut settings = running.settings.clone();
        for ((key, was), (_, now)) in running
            .settings
            .shown()
            .into_iter()
            .zip(new.settings.shown())
        {
            if was != now && !RELOADABLE.contains(&key) {
                done.need_restart.push(key);
            }
        }
        let s = &new.settings;
        settings.admin_token_sha256 = s.admin_token_sha256;
        settings.log_filter.clone_from(&s.log_filter);
        // A listener's TLS is turned on or off by a restart only.
        for (cert, key, on_now) in [
            ("tls_cert", "tls_key", self.certs[0].is_some()),
            ("admin_tls_cert", "admin_tls_key", self.certs[1].is_some()),
        ] {
            let (new_cert, new_key) = match cert {
                "tls_cert" => (&s.tls_cert, &s.tls_key),
                _ => (&s.admin_tls_cert, &s.admin_tls_key),
            };
            if new_cert.is_some() != on_now {
                done.need_restart.extend([cert, key]);
                continue;
            }
            match cert {
                "tls_cert" => {
                    settings.tls_cert.clone_from(new_cert);
                    settings.tls_key.clone_from(new_key);
                }
                _ => {
                    settings.admin_tls_cert.clone_from(new_cert);
                    settings.admin_tls_key.clone_from(new_key);
                }
            }
        }
        new.settings = settings;
        // An open relay gets keys (or loses them), and quotas come or go,
        // by a restart only.
        if running.tenants.is_empty() != new.tenants.is_empty()
            || running.tenant_quotas() != new.tenant_quotas()
        {
            done.need_restart.push("tenants");
            new.tenants.clone_from(&running.tenants);
        }
        done.need_restart.dedup();
        // Checked as a start would check it, before anything changes.
        let mut errors = text(config::recheck(&new));
        if new.destinations.is_empty() && !running.destinations.is_empty() {
            errors.push(
                "the configuration names no destination (a start would refuse it too): \
                 remove destinations one by one, or through the admin API"
                    .into(),
            );
        }
        errors.extend(text(super::check(&new, &self.guard).await));
        let certs = self.load_certs(&new, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        // The destinations first, all or none (the queue checks each
        // against what runs, under its lock): refused, nothing is applied,
        // and the same file reloaded again is checked again.
        done.destinations = self
            .redestine(&running.destinations, &new.destinations)
            .await
            .map_err(|refused| vec![format!("destinations: {}", refused.detail)])?;
        // Applied.
        if let Some(swap) = &self.intake.tenants
            && let Some(table) = Tenants::new(&new)
        {
            swap.set(table);
        }
        if let Some(registry) = &self.status {
            registry.add_tenants(new.tenants.iter().map(|t| t.name.as_str()));
        }
        if let Some(store) = &self.quotas {
            self.requota(store.as_ref(), &running, &new).await;
        }
        done.tenants = (
            new.tenants.len(),
            new.tenants.iter().map(|t| t.keys.len()).sum(),
        );
        self.admin.token.set(new.settings.admin_token_sha256);
        for (certs, key) in self.certs.iter().zip(certs) {
            if let (Some(certs), Some(key)) = (certs, key) {
                certs.set(key);
            }
        }
        if let Err(e) = telemetry::set_log_filter(new.settings.log_filter.as_deref()) {
            tracing::error!(error = %e, "the log filter could not be changed");
        }
        *running = new;
        Ok(done)
    }

    /// The listeners' certificates as `cfg` names them, read now (`None`
    /// for a listener without TLS); an error for each that does not load.
    fn load_certs(
        &self,
        cfg: &Config,
        errors: &mut Vec<String>,
    ) -> [Option<Arc<rustls::sign::CertifiedKey>>; 2] {
        let s = &cfg.settings;
        let mut load = |on: bool,
                        key: &str,
                        cert: &Option<std::path::PathBuf>,
                        pem_key: &Option<std::path::PathBuf>| {
            let (true, Some(cert), Some(pem_key)) = (on, cert, pem_key) else {
                return None;
            };
            tls::load(cert, pem_key)
                .map_err(|e| errors.push(format!("{key}: {e}")))
                .ok()
        };
        [
            load(self.certs[0].is_some(), "tls_cert", &s.tls_cert, &s.tls_key),
            load(
                self.certs[1].is_some(),
                "admin_tls_cert",
                &s.admin_tls_cert,
                &s.admin_tls_key,
            ),
        ]
    }

    /// Tenants' own quotas as `new` gives them; a tenant gone loses its own.
    async fn requota(&self, store: &dyn dripfeed::keyed::BucketStore, old: &Config, new: &Config) {
        if let Err(e) = crate::queue::quotas::set_overrides(store, new).await {
            tracing::error!(error = %e, "tenant quotas not changed by the reload (they are as before)");
        }
        for gone in old
            .tenants
            .iter()
            .filter(|t| !new.tenants.iter().any(|n| n.name == t.name))
        {
            if let Err(e) = store.clear_quota(&gone.name).await {
                tracing::error!(tenant = %gone.name, error = %e, "a removed tenant's quota was not cleared");
            }
        }
    }

    /// The configured destinations changed from `old` to `new`, by the
    /// queue, all or none: (made, changed, removed).
    async fn redestine(
        &self,
        old: &[Destination],
        new: &[Destination],
    ) -> Result<(usize, usize, usize), crate::queue::ChangeRefused> {
        let text = |d: &Destination| serde_json::to_string(&d.fields()).unwrap_or_default();
        let was: BTreeMap<&str, String> = old.iter().map(|d| (d.name.as_str(), text(d))).collect();
        let mut changes: Vec<(String, Option<Destination>)> = new
            .iter()
            .filter(|d| was.get(d.name.as_str()) != Some(&text(d)))
            .map(|d| (d.name.clone(), Some(d.clone())))
            .collect();
        changes.extend(
            old.iter()
                .filter(|d| !new.iter().any(|n| n.name == d.name))
                .map(|d| (d.name.clone(), None)),
        );
        if changes.is_empty() {
            return Ok((0, 0, 0));
        }
        // An endpoint's application is fixed once set, by a reload as by
        // the admin API (a reload moved it, its history left behind).
        let app = |d: &Destination| d.endpoint.as_ref().map(|e| e.application.to_string());
        let olds: BTreeMap<&str, &Destination> = old.iter().map(|d| (d.name.as_str(), d)).collect();
        for (name, dest) in &changes {
            if let (Some(before), Some(after)) = (olds.get(name.as_str()), dest)
                && app(before) != app(after)
            {
                let detail = format!(
                    "{name}: its application cannot change (it is {}): remove it, reload, and \
                     add it again once it has drained",
                    app(before).unwrap_or_else(|| "none".to_owned())
                );
                return Err(crate::queue::ChangeRefused::new(
                    422,
                    "application-fixed",
                    detail,
                ));
            }
        }
        let kept = self.queue.reconfigure(changes.clone()).await?;
        let mut counts = (0, 0, 0);
        for (name, dest) in changes {
            if kept.contains(&name) {
                tracing::warn!(
                    destination = %name,
                    "changed in the configuration file, but the admin API changed it last, so the \
                     API's version is kept: change it through the admin API"
                );
                continue;
            }
            match (dest, was.contains_key(name.as_str())) {
                (Some(_), false) => counts.0 += 1,
                (Some(_), true) => counts.1 += 1,
                (None, _) => counts.2 += 1,
            }
        }
        Ok(counts)
    }
}
