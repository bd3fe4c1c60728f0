//! Fleet flags: several relays share one delivery limit through Redis
//! (`--redis URL --global-rate N --fleet-size N --redis-failure open|closed`).
//! Without `--redis` the relay keeps its local limit only; built without the
//! crate feature `redis`, `--redis` is refused with a hint.

use std::sync::Arc;

use clap::{Args, ValueEnum};
use dripfeed::PermitSource;
use dripfeed::global::Failure;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FailureFlag {
    /// Keep delivering at global rate / fleet size while Redis is down.
    Open,
    /// Pause delivery while Redis is down (requests are still queued).
    Closed,
}

impl FailureFlag {
    /// The library's failure mode: open keeps `1 / fleet_size` of the
    /// shared limit (at least one relay is assumed).
    pub fn failure(self, fleet_size: u32) -> Failure {
        match self {
            FailureFlag::Open => Failure::FailOpen {
                local_share: 1.0 / f64::from(fleet_size.max(1)),
            },
            FailureFlag::Closed => Failure::FailClosed,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct FleetFlags {
    /// Redis URL holding the fleet-wide delivery limit (needs `--features redis`).
    #[arg(long)]
    pub redis: Option<String>,
    /// The fleet-wide limit, deliveries/s (default: --drain-rate).
    #[arg(long)]
    pub global_rate: Option<f64>,
    /// Expected relays in the fleet: while Redis is down and failing open,
    /// each delivers global rate / fleet size.
    #[arg(long, default_value_t = 1)]
    pub fleet_size: u32,
    /// What to do while Redis is unreachable.
    #[arg(long, value_enum, default_value = "open")]
    pub redis_failure: FailureFlag,
}

impl FleetFlags {
    /// The shared permit source, if `--redis` was given.
    pub fn permits(&self, drain_rate: f64) -> Result<Option<Arc<dyn PermitSource>>, String> {
        let Some(url) = &self.redis else {
            return Ok(None);
        };
        if self.fleet_size == 0 {
            return Err("--fleet-size must be at least 1".into());
        }
        let rate = self.global_rate.unwrap_or(drain_rate);
        shared(url, rate, self)
    }
}

#[cfg(feature = "redis")]
fn shared(url: &str, rate: f64, f: &FleetFlags) -> Result<Option<Arc<dyn PermitSource>>, String> {
    use dripfeed::global::{RedisConnection, RedisRate};
    let conn = RedisConnection::open(url).map_err(|e| format!("--redis: {e}"))?;
    let failure = f.redis_failure.failure(f.fleet_size);
    let fleet = RedisRate::builder(conn, "webhook_relay", rate)
        .name("webhook_relay")
        .on_failure(failure)
        .start()
        .map_err(|e| format!("fleet limit: {e}"))?;
    Ok(Some(Arc::new(fleet)))
}

#[cfg(not(feature = "redis"))]
fn shared(_: &str, _: f64, _: &FleetFlags) -> Result<Option<Arc<dyn PermitSource>>, String> {
    Err(
        "--redis needs the redis feature: cargo run --features redis --example webhook_relay"
            .into(),
    )
}
