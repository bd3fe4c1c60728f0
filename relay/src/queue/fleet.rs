//! The fleet's limit: several relays share one delivery rate through Redis
//! (`redis`, `global_rate`, `fleet_size`, `redis_failure`). The permits go
//! on the set's template, so every destination of every relay draws from
//! one bucket and the fleet delivers at `global_rate` in all, exactly.

use std::sync::Arc;

use dripfeed::PermitSource;

use crate::config::Settings;

/// The shared permit source, if `redis` is set.
pub async fn permits(s: &Settings) -> Result<Option<Arc<dyn PermitSource>>, String> {
    let Some(url) = &s.redis else {
        return Ok(None);
    };
    let rate = s.global_rate.unwrap_or(s.drain_rate);
    shared(url.as_str(), rate, s).await
}

#[cfg(feature = "redis")]
async fn shared(
    url: &str,
    rate: f64,
    s: &Settings,
) -> Result<Option<Arc<dyn PermitSource>>, String> {
    use dripfeed::global::RedisRate;
    let conn = super::redis_link::connect(url).await?;
    let fleet = RedisRate::builder(conn, "webhook_relay", rate)
        .name("webhook_relay")
        .on_failure(s.redis_failure.failure(s.fleet_size))
        .start()
        .map_err(|e| format!("fleet limit: {e}"))?;
    Ok(Some(Arc::new(fleet)))
}

#[cfg(not(feature = "redis"))]
async fn shared(_: &str, _: f64, _: &Settings) -> Result<Option<Arc<dyn PermitSource>>, String> {
    Err("redis: this build has no Redis (feature redis)".into())
}
