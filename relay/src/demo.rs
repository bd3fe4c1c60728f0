//! `--demo`: the classic burst. 1,000 requests/s for 5 s against the relay,
//! then wait for the drain and print what happened.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dripfeed::Outcome;
use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::app::Relay;
use crate::receiver::Receiver;

/// What the burst saw from the outside.
#[derive(Default, Debug)]
pub struct BurstResult {
    pub statuses: BTreeMap<u16, u64>,
    /// (status, Retry-After seconds) of each answer that carried one.
    pub retry_after: Vec<(u16, u64)>,
    pub peak_depth: usize,
    pub errors: u64,
    /// The ids named in the 202 answers.
    pub accepted_ids: Vec<String>,
}

impl BurstResult {
    pub fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Retry-After values (seconds) sent with `status`.
    pub fn waits(&self, status: u16) -> Vec<u64> {
        self.retry_after
            .iter()
            .filter(|(s, _)| *s == status)
            .map(|(_, w)| *w)
            .collect()
    }

    /// "lo–hi s" of the Retry-After values sent with `status`, or "-".
    pub fn range(&self, status: u16) -> String {
        let w = self.waits(status);
        match (w.iter().min(), w.iter().max()) {
            (Some(lo), Some(hi)) => format!("{lo}–{hi} s"),
            _ => "-".to_owned(),
        }
    }
}

/// Sends `per_second` POSTs a second for `seconds` to `addr`, with `tenant` if given.
pub async fn burst(
    addr: SocketAddr,
    relay: &Relay,
    per_second: u32,
    seconds: u32,
    tenant: impl Fn(u64) -> Option<String>,
) -> BurstResult {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .build()
        .unwrap_or_default();
    let url = format!("http://{addr}/v1/webhooks/deliver");
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tick = interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let per_tick = (per_second / 100).max(1);
    let mut tasks = Vec::new();
    let mut n = 0u64;
    for _ in 0..seconds * 100 {
        tick.tick().await;
        peak.fetch_max(relay.throttle.depth(), Ordering::Relaxed);
        for _ in 0..per_tick {
            let mut req = client
                .post(&url)
                .header("content-type", "application/json")
                .body(format!("{{\"event\":\"order.paid\",\"n\":{n}}}"));
            if let Some(t) = tenant(n) {
                req = req.header("x-tenant", t);
            }
            n += 1;
            tasks.push(tokio::spawn(async move {
                match req.send().await {
                    Ok(resp) => {
                        let after = resp
                            .headers()
                            .get("retry-after")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.parse::<u64>().ok());
                        let status = resp.status().as_u16();
                        let body = resp.text().await.unwrap_or_default();
                        let id = serde_json::from_str::<serde_json::Value>(&body)
                            .ok()
                            .and_then(|v| v["id"].as_str().map(str::to_owned));
                        Some((status, after, id))
                    }
                    Err(_) => None,
                }
            }));
        }
    }
    let mut out = BurstResult::default();
    for t in tasks {
        match t.await.ok().flatten() {
            Some((status, after, id)) => {
                *out.statuses.entry(status).or_default() += 1;
                out.retry_after.extend(after.map(|a| (status, a)));
                out.accepted_ids.extend(id.filter(|_| status == 202));
            }
            None => out.errors += 1,
        }
    }
    out.peak_depth = peak.load(Ordering::Relaxed).max(relay.throttle.depth());
    out
}

pub async fn run(
    addr: SocketAddr,
    relay: &Relay,
    tenants: bool,
    receiver: Option<&Receiver>,
    grace: Duration,
) -> Result<(), String> {
    println!("demo: 1,000 requests/s for 5 s …");
    let start = Instant::now();
    // with tenant quotas, half the traffic comes from one hot tenant
    let b = burst(addr, relay, 1000, 5, |n| {
        tenants.then(|| {
            if n % 2 == 0 {
                "hot".to_owned()
            } else {
                format!("tenant-{}", n % 40)
            }
        })
    })
    .await;
    let sent = start.elapsed();
    relay.drained(Duration::from_secs(60)).await;
    let report = relay.throttle.shutdown(grace).await;
    for job in report.returned {
        let _ = relay.sink.offer(job, "shutdown");
    }
    let file_lines = relay.sink.written().await;
    let s = &report.stats;
    let accepted = b.count(202);
    let kept = s.delivered()
        + s.outcome(Outcome::DeadLettered)
        + s.outcome(Outcome::Evicted)
        + s.outcome(Outcome::Returned);
    let lost = accepted.saturating_sub(kept);
    println!(
        "burst sent in {:.2} s; drained after {:.2} s",
        sent.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| accepted 202 | refused 503 | Retry-After (503) | refused 429 | Retry-After (429) | peak depth | delivered | dead-lettered | lost |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {accepted} | {} | {} | {} | {} | {} / {} | {} | {file_lines} | {lost} |",
        b.count(503),
        b.range(503),
        b.count(429),
        b.range(429),
        b.peak_depth,
        relay.throttle.capacity(),
        s.delivered(),
    );
    if let Some(rx) = receiver {
        let r = rx.stats();
        println!();
        println!(
            "receiver: {} received, {} ok, {} answered 503 (capacity exceeded)",
            r.received, r.ok, r.failed_503
        );
        // Each delivered webhook's idempotency-key is the id its 202 named.
        let ids: std::collections::HashSet<&str> =
            b.accepted_ids.iter().map(String::as_str).collect();
        let keys = rx.delivered_keys();
        let named = keys.iter().filter(|k| ids.contains(k.as_str())).count();
        println!(
            "receiver: {} distinct idempotency keys, {named} of them named by a 202",
            keys.len()
        );
    }
    if b.errors > 0 {
        println!("{} requests failed to connect", b.errors);
    }
    if lost == 0 {
        Ok(())
    } else {
        Err(format!("{lost} accepted webhooks are unaccounted for"))
    }
}
