//! Fan-out: many receivers behind one relay, each with its own leaky
//! bucket, breaker and cap on the shared in-flight budget
//! (`dripfeed::destinations`). A request names its destination with a
//! header (`X-Destination` by default); the relay only ever delivers to the
//! URLs of its configuration, never to one a request supplies.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use dripfeed::ThrottleBuilder;
use dripfeed::destinations::{BreakerConfig, DestinationConfig, Destinations};
use dripfeed::journal::Journal;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::app::{HttpDownstream, Job, problem};
use crate::latency::Latencies;

/// One configured receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    pub name: String,
    pub url: String,
    pub rate: Option<f64>,
    pub ceiling: Option<f64>,
    pub budget: Option<Duration>,
    /// A Standard Webhooks secret, `whsec_` + base64 of the key.
    pub secret: Option<String>,
}

#[derive(Clone, Debug)]
pub struct FanoutConfig {
    pub endpoints: Vec<Endpoint>,
    /// The request header naming the destination.
    pub header: String,
    /// The cap each destination has in `--max-in-flight`.
    pub max_in_flight_per_destination: usize,
    /// The shared in-flight budget (`--max-in-flight`).
    pub max_in_flight: usize,
    /// Webhooks held at once across all destinations.
    pub max_jobs: usize,
    pub breaker: BreakerConfig,
}

/// A destination name: 1 to 64 of `A-Z a-z 0-9 . _ -`.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check(e: &Endpoint) -> Result<(), String> {
    if !valid_name(&e.name) {
        return Err(format!(
            "destination name {:?}: 1 to 64 of A-Z a-z 0-9 . _ -",
            e.name
        ));
    }
    let url =
        reqwest::Url::parse(&e.url).map_err(|err| format!("{}: url {:?}: {err}", e.name, e.url))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{}: url {:?} is not http(s)", e.name, e.url));
    }
    if let Some(secret) = &e.secret {
        secret_key(secret).map_err(|err| format!("{}: {err}", e.name))?;
    }
    Ok(())
}

/// `NAME=URL`, from `--destination`.
pub fn parse_destination(s: &str) -> Result<Endpoint, String> {
    let (name, url) = s
        .split_once('=')
        .ok_or_else(|| format!("--destination {s:?}: expected NAME=URL"))?;
    let e = Endpoint {
        name: name.trim().to_owned(),
        url: url.trim().to_owned(),
        rate: None,
        ceiling: None,
        budget: None,
        secret: None,
    };
    check(&e)?;
    Ok(e)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    url: String,
    rate: Option<f64>,
    ceiling: Option<f64>,
    /// e.g. "2s", "500ms".
    budget: Option<String>,
    secret: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum File {
    List(Vec<Entry>),
    Object { destinations: Vec<Entry> },
}

/// `--destinations FILE`: a JSON array of `{name, url, rate?, ceiling?,
/// budget?, secret?}`, or `{"destinations": [...]}`.
pub fn load(path: &Path) -> Result<Vec<Endpoint>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: File = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let entries = match file {
        File::List(l) => l,
        File::Object { destinations } => destinations,
    };
    entries
        .into_iter()
        .map(|e| {
            let budget = match &e.budget {
                Some(b) => Some(
                    humantime::parse_duration(b)
                        .map_err(|err| format!("{}: budget {b:?}: {err}", e.name))?,
                ),
                None => None,
            };
            let ep = Endpoint {
                name: e.name,
                url: e.url,
                rate: e.rate,
                ceiling: e.ceiling,
                budget,
                secret: e.secret,
            };
            check(&ep)?;
            Ok(ep)
        })
        .collect()
}

/// The key of a Standard Webhooks secret: base64 after the `whsec_` prefix.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("secret is not base64 after whsec_: {e}"))?;
    if key.is_empty() {
        return Err("secret is empty".into());
    }
    Ok(key)
}

/// The `webhook-signature` value: `v1,` + base64 of HMAC-SHA256 over
/// `id.timestamp.body` (Standard Webhooks).
pub fn sign(key: &[u8], id: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let sig = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(sig)
    )
}

/// Where a destination's deliveries go, and its signing key.
type Target = (String, Option<Arc<[u8]>>);

/// The relay's destinations.
pub struct Fanout {
    pub set: Destinations<Job>,
    header: String,
    /// The configured names, in configuration order.
    pub names: Vec<Arc<str>>,
}

impl Fanout {
    pub fn start(
        cfg: &FanoutConfig,
        template: ThrottleBuilder<Job>,
        journal: Option<Journal>,
        client: reqwest::Client,
        latencies: Arc<Latencies>,
    ) -> Result<Fanout, String> {
        let mut targets: HashMap<String, Target> = HashMap::new();
        let mut builder = Destinations::builder(template)
            .max_in_flight(cfg.max_in_flight)
            .max_jobs(cfg.max_jobs)
            .max_destinations(cfg.endpoints.len().max(1))
            .breaker(cfg.breaker);
        let mut names = Vec::new();
        for e in &cfg.endpoints {
            check(e)?;
            let key = match &e.secret {
                Some(s) => Some(Arc::from(secret_key(s)?)),
                None => None,
            };
            if targets
                .insert(e.name.clone(), (e.url.clone(), key))
                .is_some()
            {
                return Err(format!("destination {:?} is configured twice", e.name));
            }
            let mut d = DestinationConfig::default();
            if let Some(r) = e.rate {
                d = d.rate(r);
            }
            if let Some(c) = e.ceiling {
                d = d.ceiling(c);
            }
            if let Some(b) = e.budget {
                d = d.budget(b);
            }
            builder = builder.destination(e.name.clone(), d);
            names.push(Arc::from(e.name.as_str()));
        }
        if let Some(journal) = journal {
            builder = builder.journal(journal);
        }
        let set = builder
            .build(move |name: &str| {
                // Only configured names reach the set (see `pick`), and those
                // the journal recovered: a name no longer configured gets no
                // URL, and its webhooks are dead-lettered.
                let (url, secret) = targets.get(name).cloned().unwrap_or_default();
                HttpDownstream {
                    client: client.clone(),
                    url,
                    latencies: latencies.clone(),
                    secret,
                    name: Some(Arc::from(name)),
                }
            })
            .map_err(|e| format!("destinations: {e}"))?;
        Ok(Fanout {
            set,
            header: cfg.header.clone(),
            names,
        })
    }

    /// The destination a request names: 404 for a name not configured, 400
    /// without the header when more than one destination is configured.
    pub fn pick(&self, headers: &HeaderMap) -> Result<Arc<str>, Box<Response>> {
        let asked = headers.get(self.header.as_str()).map(|v| v.to_str());
        match asked {
            Some(Ok(name)) => {
                let name = name.trim();
                self.names
                    .iter()
                    .find(|n| &***n == name)
                    .cloned()
                    .ok_or_else(|| {
                        let detail = format!("no destination {name:?} is configured");
                        Box::new(problem(
                            StatusCode::NOT_FOUND,
                            "unknown-destination",
                            detail,
                            Vec::new(),
                        ))
                    })
            }
            Some(Err(_)) => Err(Box::new(problem(
                StatusCode::BAD_REQUEST,
                "bad-destination",
                format!("the {} header is not text", self.header),
                Vec::new(),
            ))),
            None if self.names.len() == 1 => Ok(self.names[0].clone()),
            None => Err(Box::new(problem(
                StatusCode::BAD_REQUEST,
                "missing-destination",
                format!(
                    "name the destination with the {} header (one of: {})",
                    self.header,
                    self.names
                        .iter()
                        .map(|n| &**n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Vec::new(),
            ))),
        }
    }

    /// Across every destination: depth, capacity, summed rate, delivered,
    /// dead-lettered (with evicted).
    pub fn totals(&self) -> (u64, u64, f64, u64, u64) {
        self.set.all_stats().iter().fold((0, 0, 0.0, 0, 0), |t, s| {
            (
                t.0 + s.depth(),
                t.1 + s.capacity(),
                t.2 + if s.is_active() { s.drain_rate() } else { 0.0 },
                t.3 + s.delivered(),
                t.4 + s.dead_lettered() + s.evicted(),
            )
        })
    }

    /// One status line per configured destination.
    pub fn status_lines(&self) -> Vec<String> {
        self.set
            .all_stats()
            .into_iter()
            .filter(|s| s.is_named())
            .map(|s| {
                format!(
                    "  {:<12} depth {:>5}/{:<5} rate {:>6.1}/s in flight {:>3} accepted {:>7} delivered {:>7} refused {:>6} dead-lettered {:>5} breaker {}",
                    s.name(),
                    s.depth(),
                    s.capacity(),
                    s.drain_rate(),
                    s.in_flight(),
                    s.accepted(),
                    s.delivered(),
                    s.refused(),
                    s.dead_lettered() + s.evicted(),
                    s.breaker().as_str(),
                )
            })
            .collect()
    }
}
