//! The demos: `--demo` fires the classic burst (1,000 requests/s for 5 s)
//! at the relay, waits for the drain and prints what happened;
//! `--demo-fanout` (in `fanout`) floods three receivers of its own. The
//! built-in fragile receiver (`receiver`) starts only for these, on a port
//! the system picks.

pub(crate) mod fanout;
pub(crate) mod receiver;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use dripfeed::destinations::Destinations;
use tokio::time::{Instant, MissedTickBehavior, interval};

use crate::dead_letter::FileSink;
use crate::domain::job::Job;
use receiver::Receiver;

/// What the burst saw from the outside.
#[derive(Default, Debug)]
pub(crate) struct BurstResult {
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
    /// (status, Retry-After seconds) of each answer that carried one.
    pub retry_after: Vec<(u16, u64)>,
    /// The deepest the destination's queue was seen, and its capacity then.
    pub peak_depth: (u64, u64),
    /// Requests that got no answer.
    pub errors: u64,
    /// The ids named in the 202 answers.
    pub accepted_ids: Vec<String>,
}

impl BurstResult {
    /// Answers with `status`.
    pub(crate) fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Retry-After values (seconds) sent with `status`.
    pub(crate) fn waits(&self, status: u16) -> Vec<u64> {
        self.retry_after
            .iter()
            .filter(|(s, _)| *s == status)
            .map(|(_, w)| *w)
            .collect()
    }

    /// "lo–hi s" of the Retry-After values sent with `status`, or "-".
    pub(crate) fn range(&self, status: u16) -> String {
        let w = self.waits(status);
        match (w.iter().min(), w.iter().max()) {
            (Some(lo), Some(hi)) => format!("{lo}–{hi} s"),
            _ => "-".to_owned(),
        }
    }
}

/// The deepest of `a` and the destination's depth now (with its capacity).
fn deeper(set: &Destinations<Job>, name: &str, a: (u64, u64)) -> (u64, u64) {
    match set.stats(name) {
        Some(s) if s.depth() > a.0 => (s.depth(), s.capacity()),
        Some(s) if s.is_active() => (a.0, a.1.max(s.capacity())),
        _ => a,
    }
}

/// Sends `per_second` POSTs a second for `seconds` to `addr`, with `tenant`
/// if given, watching the destination `name`'s depth.
pub(crate) async fn burst(
    addr: SocketAddr,
    (set, name): (&Destinations<Job>, &str),
    per_second: u32,
    seconds: u32,
    tenant: impl Fn(u64) -> Option<String>,
) -> BurstResult {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .build()
        .unwrap_or_default();
    let url = format!("http://{addr}/v1/webhooks/deliver");
    let mut peak = (0, 0);
    let mut tick = interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let per_tick = (per_second / 100).max(1);
    let mut tasks = Vec::new();
    let mut n = 0u64;
    for _ in 0..seconds * 100 {
        tick.tick().await;
        peak = deeper(set, name, peak);
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
    out.peak_depth = deeper(set, name, peak);
    out
}

/// What `--demo` needs of the running relay.
pub(crate) struct Demo<'a> {
    /// The relay's address.
    pub addr: SocketAddr,
    /// The destinations set, and the one the burst goes to.
    pub set: &'a Destinations<Job>,
    /// The destination's name.
    pub name: &'a str,
    /// The dead-letter file.
    pub sink: &'a FileSink,
    /// Whether tenants have quotas (half the burst is one hot tenant).
    pub tenants: bool,
    /// The built-in receiver, when the burst goes to it.
    pub receiver: Option<&'a Receiver>,
    /// How long shutdown may drain.
    pub grace: Duration,
}

/// The burst, the drain, and the table.
pub(crate) async fn run(demo: Demo<'_>) -> Result<(), String> {
    let Demo {
        addr,
        set,
        name,
        sink,
        tenants,
        receiver,
        grace,
    } = demo;
    say!("demo: 1,000 requests/s for 5 s …");
    let start = Instant::now();
    // with tenant quotas, half the traffic comes from one hot tenant
    let b = burst(addr, (set, name), 1000, 5, |n| {
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
    let until = Instant::now() + Duration::from_secs(60);
    while set.held() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (stats, returned) = set.shutdown(grace).await;
    let returned_n = returned.len() as u64;
    for (_, job) in returned {
        let _ = sink.offer(job, "shutdown");
    }
    let file_lines = sink.written().await;
    let sum =
        |f: fn(&dripfeed::destinations::DestinationStats) -> u64| stats.iter().map(f).sum::<u64>();
    let delivered = sum(|s| s.delivered());
    let accepted = b.count(202);
    let kept = delivered + sum(|s| s.dead_lettered()) + sum(|s| s.evicted()) + returned_n;
    let lost = accepted.saturating_sub(kept);
    say!(
        "burst sent in {:.2} s; drained after {:.2} s",
        sent.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    say!();
    say!(
        "| accepted 202 | refused 503 | Retry-After (503) | refused 429 | Retry-After (429) | peak depth | delivered | dead-lettered | lost |"
    );
    say!("|---|---|---|---|---|---|---|---|---|");
    say!(
        "| {accepted} | {} | {} | {} | {} | {} / {} | {delivered} | {file_lines} | {lost} |",
        b.count(503),
        b.range(503),
        b.count(429),
        b.range(429),
        b.peak_depth.0,
        b.peak_depth.1,
    );
    if let Some(rx) = receiver {
        let r = rx.stats();
        say!();
        say!(
            "receiver: {} received, {} ok, {} answered 503 (capacity exceeded)",
            r.received,
            r.ok,
            r.failed_503
        );
        // Each delivered webhook's idempotency-key is the id its 202 named.
        let ids: std::collections::HashSet<&str> =
            b.accepted_ids.iter().map(String::as_str).collect();
        let keys = rx.delivered_keys();
        let named = keys.iter().filter(|k| ids.contains(k.as_str())).count();
        say!(
            "receiver: {} distinct idempotency keys, {named} of them named by a 202",
            keys.len()
        );
    }
    if b.errors > 0 {
        say!("{} requests failed to connect", b.errors);
    }
    if lost == 0 {
        Ok(())
    } else {
        Err(format!("{lost} accepted webhooks are unaccounted for"))
    }
}
