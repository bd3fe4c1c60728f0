//! `print-config`: the settings in force as a TOML file, each line followed
//! by its source, secrets and passwords redacted. The output reads back as
//! a `--config` file.

use std::fmt::Write;

use super::Config;
use super::error::Origin;
use super::value::{FailureMode, QueueKind};

/// Where `origin` is, for a comment after the value.
fn source(origin: Option<&Origin>) -> String {
    origin.map_or_else(|| "default".to_owned(), Origin::to_string)
}

/// The default `open` failure mode under `queue = redis`: in force for
/// tenant quotas only, and refused when a file names it.
fn unkept_open(cfg: &Config) -> bool {
    let s = &cfg.settings;
    s.queue == QueueKind::Redis
        && s.redis_failure == FailureMode::Open
        && !cfg.given("redis_failure")
}

/// The configuration in force, with each value's source.
pub(crate) fn render(cfg: &Config) -> String {
    let mut out = String::from(
        "# dripfeed-relay: the settings in force, each with its source\n\
         # (secrets and passwords shown as (redacted) and ***: write them back to use it)\n",
    );
    for (key, value) in cfg.settings.shown() {
        let from = source(cfg.origin(key));
        if key == "redis_failure" && unkept_open(cfg) {
            // Written as a value it would not read back: `open` is refused
            // with queue = redis, where a Redis that is down pauses intake.
            let _ = writeln!(
                out,
                "# redis_failure = \"open\" (tenant quotas only: with queue = redis, intake \
                 answers 503 while Redis is down)  # {from}"
            );
            continue;
        }
        let _ = match value {
            Some(v) => writeln!(out, "{key} = {v}  # {from}"),
            None => writeln!(out, "# {key} is not set  # {from}"),
        };
    }
    for d in &cfg.destinations {
        let _ = writeln!(out, "\n[[destinations]]  # {}", d.origin);
        for (field, value) in d.shown() {
            let _ = writeln!(out, "{field} = {value}");
        }
    }
    for t in &cfg.tenants {
        let _ = writeln!(out, "\n[[tenants]]  # {}", t.origin);
        for line in t.shown() {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
