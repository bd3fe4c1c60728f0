//! The relay's configuration: one set of settings from three sources.
//!
//! Every setting is a flag (`--drain-rate 200`), a key of the `--config`
//! TOML file (`drain_rate = 200`) and an environment variable
//! (`DRIPFEED_DRAIN_RATE=200`). A flag beats the environment, which beats
//! the file, which beats the default. Destinations are `[[destinations]]`
//! tables, `--destinations FILE` and `--destination NAME=URL`, all added
//! up; `downstream` is the destination `default`.
//!
//! **Why this shape.** Each setting is declared once, in `settings.rs`,
//! and a `macro_rules!` generator (`declare.rs`) makes from it the
//! resolved field, the clap flag, the file key, the variable's name, the
//! merge and the printed line, so the three sources cannot drift apart.
//! clap parses only the command line (its fields are all `Option`, so a
//! flag not given is seen as such); the environment is read from a map and
//! the file from a string, so [`load`] is a pure function of its
//! [`Sources`] and is unit-tested without a process. The file is read with
//! `toml`'s spanned document (`DeTable`), not through serde, so every
//! unknown key and wrong type is reported with its line, all of them at
//! once; unknown `DRIPFEED_*` variables are found by comparing each one
//! against the table. `figment` would merge the layers too, but reports
//! one error without a line; `clap`'s own `env` would read the process
//! environment, which tests must not change.

pub(crate) mod cidrs;
mod declare;
mod destinations;
pub(crate) mod digest;
mod error;
pub(crate) mod paths;
mod print;
#[cfg(test)]
mod reference;
mod settings;
mod sources;
pub(crate) mod subscription;
pub(crate) mod tenants;
mod validate;
pub(crate) mod value;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use destinations::{DEFAULT_NAME, Destination, Fields};
#[cfg(feature = "redis")]
pub(crate) use error::FLEET_MAP;
pub(crate) use error::{ConfigError, ConfigErrors, Origin};
pub(crate) use print::render;
pub(crate) use settings::{KEYS, SettingFlags, Settings};
pub(crate) use subscription::{path_name, valid_name};
pub(crate) use tenants::Tenant;
pub(crate) use validate::{may_start_empty, require_destination};

use settings::Layer;

/// The configuration in force.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Every setting's value.
    pub settings: Settings,
    /// Where each setting's value came from, by key.
    pub origins: Vec<(&'static str, Origin)>,
    /// Every destination, `default` (from `downstream`) first.
    pub destinations: Vec<Destination>,
    /// The tenants and their keys (`[[tenants]]`); none: the relay is open.
    pub tenants: Vec<Tenant>,
    /// Where the relay's files are (absolute).
    pub paths: paths::Paths,
}

/// The flags that choose and give settings, shared by every command.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct SourceFlags {
    /// A TOML file of settings (keys are the flags' names with underscores)
    /// and [[destinations]] tables; flags and DRIPFEED_* variables override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub settings: SettingFlags,
    /// A receiver, NAME=URL (repeatable): each gets its own leaky bucket,
    /// breaker and cap on max_in_flight; a request names it with the
    /// destination header.
    #[arg(long = "destination", value_name = "NAME=URL")]
    pub destination: Vec<String>,
    /// Receivers from a file: JSON ([{"name", "url", "rate"?, "ceiling"?,
    /// "budget"?, "secret"?}]) or TOML ([[destinations]] tables).
    #[arg(long = "destinations", value_name = "FILE")]
    pub destinations: Option<PathBuf>,
}

/// What [`load`] reads: each source as data.
pub(crate) struct Sources<'a> {
    /// The `--config` file's path and text.
    pub file: Option<(&'a Path, &'a str)>,
    /// The environment (only `DRIPFEED_*` variables are read).
    pub env: &'a BTreeMap<String, String>,
    /// The setting flags given.
    pub flags: SettingFlags,
    /// Each `--destination NAME=URL`.
    pub destination_flags: &'a [String],
    /// The `--destinations` file's path and text.
    pub destinations_file: Option<(&'a Path, &'a str)>,
    /// The working directory, `$STATE_DIRECTORY` and the disk, for the
    /// data paths.
    pub places: &'a paths::Places,
}

/// The configuration the sources give, or every error found in them.
pub(crate) fn load(src: Sources<'_>) -> Result<Config, ConfigErrors> {
    let mut errors = Vec::new();
    let sources::FileParts {
        layer: file,
        destinations: mut found,
        tenants,
    } = match src.file {
        Some((path, text)) => sources::file(path, text, &mut errors),
        None => sources::FileParts::default(),
    };
    let env = sources::env(src.env, &mut errors);
    let flags = Layer::from_flags(src.flags);
    if let Some((path, text)) = src.destinations_file {
        found.extend(destinations::from_file(path, text, &mut errors));
    }
    for flag in src.destination_flags {
        found.extend(destinations::from_flag(flag, &mut errors));
    }
    let (settings, origins) = Layer::merge(flags, env, file)
        .map_err(|e| ConfigErrors(vec![ConfigError::new("defaults", None, e)]))?;
    let paths = paths::resolve(&settings, src.places).unwrap_or_else(|e| {
        let origin = origins
            .iter()
            .find(|(k, _)| *k == "data_dir")
            .map(|(_, o)| o.clone());
        errors.push(ConfigError::new("data_dir", origin, e));
        paths::Paths::default()
    });
    let mut cfg = Config {
        settings,
        origins,
        destinations: Vec::new(),
        tenants,
        paths,
    };
    if let Some(url) = &cfg.settings.downstream {
        let origin = cfg.origin("downstream").cloned().unwrap_or(Origin::Default);
        cfg.destinations
            .push(destinations::from_downstream(url, origin));
    }
    cfg.destinations.extend(found);
    destinations::check_unique(&cfg.destinations, &mut errors);
    let tenant_rate = cfg.settings.tenant_rate;
    tenants::check(&cfg.tenants, &cfg.destinations, tenant_rate, &mut errors);
    validate::check(&cfg, &mut errors);
    match errors.is_empty() {
        true => Ok(cfg),
        false => Err(ConfigErrors(errors)),
    }
}

/// The rules [`load`] checks, run again over `cfg` (a reload's
/// configuration, its restart-only settings put back as they run).
pub(crate) fn recheck(cfg: &Config) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    destinations::check_unique(&cfg.destinations, &mut errors);
    let tenant_rate = cfg.settings.tenant_rate;
    tenants::check(&cfg.tenants, &cfg.destinations, tenant_rate, &mut errors);
    validate::check(cfg, &mut errors);
    errors
}

/// Reads the files the flags name and the process environment, then [`load`]s.
pub(crate) fn from_process(flags: SourceFlags) -> Result<Config, ConfigErrors> {
    let read = |path: &Path, key: &str, flag: &str| {
        std::fs::read_to_string(path).map_err(|e| {
            let origin = Some(Origin::Flag(flag.to_owned()));
            ConfigErrors(vec![ConfigError::new(
                key,
                origin,
                format!("{}: {e}", path.display()),
            )])
        })
    };
    let file = match &flags.config {
        Some(path) => Some((path.as_path(), read(path, "config", "--config")?)),
        None => None,
    };
    let destinations_file = match &flags.destinations {
        Some(path) => Some((
            path.as_path(),
            read(path, "destinations", "--destinations")?,
        )),
        None => None,
    };
    let mut env = BTreeMap::new();
    let mut errors = Vec::new();
    for (var, value) in std::env::vars_os() {
        match (var.into_string(), value.into_string()) {
            (Ok(var), Ok(value)) => {
                env.insert(var, value);
            }
            (Ok(var), Err(_)) if var.starts_with(sources::PREFIX) => {
                let origin = Some(Origin::Env(var.clone()));
                errors.push(ConfigError::new(var, origin, "is not UTF-8"));
            }
            _ => {}
        }
    }
    let loaded = load(Sources {
        file: file.as_ref().map(|(p, t)| (*p, t.as_str())),
        env: &env,
        flags: flags.settings,
        destination_flags: &flags.destination,
        destinations_file: destinations_file.as_ref().map(|(p, t)| (*p, t.as_str())),
        places: &paths::Places::of_process(),
    });
    match loaded {
        Ok(cfg) if errors.is_empty() => Ok(cfg),
        Ok(_) => Err(ConfigErrors(errors)),
        Err(ConfigErrors(more)) => {
            errors.extend(more);
            Err(ConfigErrors(errors))
        }
    }
}

/// `cmd` with each setting flag's help ending in its default and its
/// variable, switches (`--adaptive`) taking no value unless given one
/// with `=`, and list flags given once per item (read them back with
/// [`SettingFlags::gather`]).
pub(crate) fn describe_flags(mut cmd: clap::Command) -> clap::Command {
    for key in KEYS {
        cmd = cmd.mut_arg(key.name, |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let default = key
                .default
                .map_or(String::new(), |d| format!(" [default: {d}]"));
            let mut arg = arg.help(format!("{help}{default} [env: {}]", key.env()));
            if let Some(flag) = key.repeat {
                arg = arg
                    .long(flag)
                    .action(clap::ArgAction::Append)
                    .value_name("CIDR");
            }
            match key.switch {
                true => arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true"),
                false => arg,
            }
        });
    }
    cmd
}

#[cfg(test)]
pub(crate) mod tests;
