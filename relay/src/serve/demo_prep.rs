//! What a demo needs before the relay starts: the built-in receivers, the
//! destinations at them, and the allow list opened to loopback for them
//! (and only for them: a configured destination is checked as ever).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{Failure, Mode, refused};
use crate::config::value::{HttpUrl, Value};
use crate::config::{self, Config, ConfigErrors, DEFAULT_NAME, Destination, Origin};
use crate::demo;

/// A destination the demo adds, at a built-in receiver's `url`.
fn demo_destination(
    name: &str,
    url: &str,
    rate: Option<(f64, f64)>,
) -> Result<Destination, String> {
    Ok(Destination {
        name: name.to_owned(),
        url: HttpUrl::from_text(url)?,
        rate: rate.map(|r| r.0),
        ceiling: rate.map(|r| r.1),
        budget: None,
        secret: None,
        previous_secret: None,
        metrics: None,
        endpoint: None,
        origin: Origin::Flag(format!("--demo ({name})")),
    })
}

/// The directory a demo keeps its dead letters in unless told where
/// (removed when it ends).
pub(super) fn own_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("dripfeed-relay-demo-{}", std::process::id()))
}

/// Starts what a demo needs beside the relay and adds its destinations:
/// the built-in receiver for `--demo` without a destination, the three
/// receivers for `--demo-fanout`. Never beside a configured destination,
/// nor with `[[tenants]]` (the demos post without keys). A relay that
/// serves needs a destination unless the admin API can make them in a
/// place the operator gave ([`config::may_start_empty`]) or has changed
/// them (`api_changed`).
pub(super) async fn prepare(
    cfg: &mut Config,
    mode: Mode,
    api_changed: bool,
) -> Result<Option<Arc<demo::receiver::Receiver>>, Failure> {
    if mode != Mode::Serve && !cfg.tenants.is_empty() {
        let flag = match mode {
            Mode::Demo => "--demo",
            _ => "--demo-fanout",
        };
        return Err(refused(
            "tenants",
            cfg.tenants.first().map(|t| t.origin.clone()),
            format!("{flag} posts without API keys: run it without [[tenants]]"),
        ));
    }
    // A demo keeps its dead letters where its journal is (a directory of
    // its own under the system's temporary one), not in the directory it
    // was run from, unless told where.
    let told = ["dead_letter_file", "data_dir", "state_dir"]
        .into_iter()
        .any(|key| cfg.given(key));
    if mode != Mode::Serve && !told {
        cfg.paths.dead_letter_file = own_dir().join("dead-letter.jsonl");
        cfg.paths.data_dir = cfg
            .paths
            .dead_letter_file
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
    }
    match mode {
        Mode::Serve if api_changed => Ok(None),
        // The admin API can make them (applications and endpoints first,
        // for a relay that sends events): its registry keeps them.
        Mode::Serve if config::may_start_empty(cfg) => Ok(None),
        Mode::Serve => {
            config::require_destination(cfg).map_err(|e| Failure::Config(ConfigErrors(vec![e])))?;
            Ok(None)
        }
        Mode::Demo if cfg.destinations.len() > 1 => Err(refused(
            "demo",
            Some(Origin::Flag("--demo".into())),
            "the burst goes to one destination: configure one, or none for the built-in receiver",
        )),
        Mode::Demo if cfg.destinations.len() == 1 => Ok(None),
        Mode::Demo => {
            let rx = demo::receiver::Receiver::new(cfg.settings.receiver_capacity);
            let any: SocketAddr = ([127, 0, 0, 1], 0).into();
            let addr = demo::receiver::serve(any, rx.clone())
                .await
                .map_err(|e| format!("starting the built-in receiver: {e}"))?;
            let url = format!("http://{addr}/hooks");
            cfg.destinations
                .push(demo_destination(DEFAULT_NAME, &url, None)?);
            allow_own_receivers(cfg, addr);
            Ok(Some(rx))
        }
        Mode::DemoFanout => {
            if let Some(d) = cfg.destinations.first() {
                let why = format!(
                    "--demo-fanout brings its own receivers: remove the destinations ({} from {})",
                    d.name, d.origin
                );
                return Err(refused(
                    "demo_fanout",
                    Some(Origin::Flag("--demo-fanout".into())),
                    why,
                ));
            }
            let rx = demo::fanout::start_receivers()
                .await
                .map_err(|e| format!("starting the demo's receivers: {e}"))?;
            for ((name, url), (_, rate, ceiling)) in rx.urls.iter().zip(demo::fanout::DESTINATIONS)
            {
                cfg.destinations
                    .push(demo_destination(name, url, Some((rate, ceiling)))?);
            }
            // All three listen on 127.0.0.1.
            allow_own_receivers(cfg, ([127, 0, 0, 1], 0).into());
            let s = &mut cfg.settings;
            s.deliver_timeout = s.deliver_timeout.min(Duration::from_secs(2));
            s.no_journal = true;
            Ok(None)
        }
    }
}

/// Lets deliveries reach a built-in receiver at `addr` (a loopback
/// address): that one address, added to `allow_destination_cidrs`.
fn allow_own_receivers(cfg: &mut Config, addr: SocketAddr) {
    let list = cfg.settings.allow_destination_cidrs.get_or_insert_default();
    list.0.push(ipnet::IpNet::from(addr.ip()));
}
