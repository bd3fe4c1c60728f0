//! The three sources read into layers: the TOML file (with each value's
//! line), the `DRIPFEED_*` environment (from a map, so tests need no process
//! environment) and the flags clap parsed. Every unknown key, wrong type
//! and unknown variable is collected, not only the first.

use std::collections::BTreeMap;
use std::path::Path;

use toml::de::DeTable;

use super::destinations::{self, Destination};
use super::error::{ConfigError, Origin, closest};
use super::settings::{KEYS, Layer};
use super::tenants::{self, Tenant};

/// The variables' prefix.
pub(super) const PREFIX: &str = "DRIPFEED_";

/// Actions given on the command line only: never a file key or a variable.
const ACTIONS: [&str; 4] = ["config", "demo", "demo_fanout", "redrive"];

/// "unknown key "x"", with the nearest known key when there is one.
fn unknown(what: &str, key: &str, shown: impl Fn(&str) -> String) -> String {
    let tables = ["destinations", "tenants"];
    match closest(key, KEYS.iter().map(|k| k.name).chain(tables)) {
        Some(near) => format!("unknown {what} (did you mean {}?)", shown(near)),
        None => format!("unknown {what}"),
    }
}

/// What the `--config` file gives: settings, destinations and tenants.
#[derive(Default)]
pub(super) struct FileParts {
    /// Its settings.
    pub layer: Layer,
    /// Its `[[destinations]]`.
    pub destinations: Vec<Destination>,
    /// Its `[[tenants]]`.
    pub tenants: Vec<Tenant>,
}

/// The `--config` file: its settings, `[[destinations]]` and `[[tenants]]`.
pub(super) fn file(path: &Path, text: &str, errors: &mut Vec<ConfigError>) -> FileParts {
    let mut layer = Layer::default();
    let mut found = Vec::new();
    let mut tenants_found = Vec::new();
    let mut errs = Vec::new();
    let errors_out = errors;
    let errors = &mut errs;
    let (doc, parse_errors) = DeTable::parse_recoverable(text);
    for e in parse_errors {
        let at = Origin::at(path, text, e.span().map_or(0, |s| s.start));
        errors.push(ConfigError::new("toml", Some(at), e.message().to_owned()));
    }
    for (key, value) in doc.get_ref().iter() {
        let name = key.get_ref().as_ref();
        let at = Origin::at(path, text, key.span().start);
        if name == "destinations" {
            found.extend(destinations::from_toml(value, path, text, errors));
            continue;
        }
        if name == "tenants" {
            tenants_found.extend(tenants::from_toml(value, path, text, errors));
            continue;
        }
        let message = if ACTIONS.contains(&name) {
            format!(
                "--{} is a command-line action, not a file key",
                name.replace('_', "-")
            )
        } else {
            match layer.set_toml(name, value.get_ref(), at.clone()) {
                Ok(true) => continue,
                Ok(false) => unknown(&format!("key {name:?}"), name, |k| k.to_owned()),
                Err(e) => e,
            }
        };
        errors.push(ConfigError::new(name, Some(at), message));
    }
    // In the file's order.
    errs.sort_by_key(|e| match &e.origin {
        Some(Origin::File { line, .. }) => *line,
        _ => None,
    });
    errors_out.append(&mut errs);
    FileParts {
        layer,
        destinations: found,
        tenants: tenants_found,
    }
}

/// The `DRIPFEED_*` variables among `vars`.
pub(super) fn env(vars: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Layer {
    let mut layer = Layer::default();
    for (var, text) in vars.range(PREFIX.to_owned()..) {
        let Some(rest) = var.strip_prefix(PREFIX) else {
            break; // sorted: past the prefix
        };
        let key = rest.to_ascii_lowercase();
        let origin = Origin::Env(var.clone());
        let (key, message) = if ACTIONS.contains(&key.as_str()) {
            let flag = key.replace('_', "-");
            (
                key,
                format!("--{flag} is a command-line action, not a variable"),
            )
        } else if key.starts_with("destination") && key != "destination_header" {
            let why = "destinations come from --destination, --destinations FILE or \
                       [[destinations]] in --config; a single receiver can be DRIPFEED_DOWNSTREAM";
            (var.clone(), why.to_owned())
        } else if key.starts_with("tenants") {
            let why = "tenants and their keys come from [[tenants]] in --config only";
            (var.clone(), why.to_owned())
        } else {
            match layer.set_text(&key, text, origin.clone()) {
                Ok(true) => continue,
                Ok(false) => {
                    let shown = |k: &str| format!("{PREFIX}{}", k.to_ascii_uppercase());
                    (var.clone(), unknown("variable", &key, shown))
                }
                Err(e) => (key, e),
            }
        };
        errors.push(ConfigError::new(key, Some(origin), message));
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reports_every_bad_key_with_its_line() {
        let text = "drain_rate = \"fast\"\nlisten = \"127.0.0.1:9\"\ndrain_rae = 5\ndemo = true\n[server]\nport = 1\n";
        let mut errors = Vec::new();
        let layer = file(Path::new("relay.toml"), text, &mut errors).layer;
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            shown,
            [
                "relay.toml:1: drain_rate: expected a number, found string",
                "relay.toml:3: drain_rae: unknown key \"drain_rae\" (did you mean drain_rate?)",
                "relay.toml:4: demo: --demo is a command-line action, not a file key",
                "relay.toml:5: server: unknown key \"server\"",
            ]
        );
        assert!(layer.listen.is_some());
    }

    #[test]
    fn a_toml_syntax_error_names_its_line() {
        let mut errors = Vec::new();
        file(
            Path::new("r.toml"),
            "listen = \"a\"\ndrain_rate = \n",
            &mut errors,
        );
        assert!(
            errors
                .iter()
                .any(|e| e.to_string().starts_with("r.toml:2: ")),
            "{errors:?}"
        );
    }

    #[test]
    fn variables_are_read_and_unknown_ones_refused() {
        let vars: BTreeMap<String, String> = [
            ("DRIPFEED_DRAIN_RATE", "50"),
            ("DRIPFEED_DRAIN_RAT", "50"),
            ("DRIPFEED_CONFIG", "x.toml"),
            ("DRIPFEED_LATENCY_BUDGET", "soon"),
            ("DRIPFEED_DESTINATION_HEADER", "X-To"),
            ("HOME", "/root"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut errors = Vec::new();
        let layer = env(&vars, &mut errors);
        assert_eq!(layer.drain_rate.map(|d| d.0), Some(50.0));
        assert_eq!(
            layer.destination_header.map(|d| d.0).as_deref(),
            Some("X-To")
        );
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 3, "{shown:?}");
        assert_eq!(
            shown[0],
            "environment DRIPFEED_CONFIG: config: --config is a command-line action, not a variable"
        );
        assert_eq!(
            shown[1],
            "environment DRIPFEED_DRAIN_RAT: unknown variable (did you mean DRIPFEED_DRAIN_RATE?)"
        );
        assert!(
            shown[2].starts_with(
                "environment DRIPFEED_LATENCY_BUDGET: latency_budget: expected a duration"
            ),
            "{shown:?}"
        );
    }
}
