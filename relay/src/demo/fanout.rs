//! `--demo-fanout`: three built-in receivers behind one relay, a healthy
//! one, a slow one (20/s) and a dead one (takes the connection, never
//! answers), each flooded at 40/s; prints what each destination accepted,
//! delivered, refused and dead-lettered.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use dripfeed::destinations::Destinations;
use tokio::time::{MissedTickBehavior, interval};

use super::receiver;
use crate::domain::job::Job;

/// The demo's destinations: name, rate and ceiling (the dead one's queue
/// of 100, 2 s at 50/s, is full in 2.5 s).
pub(crate) const DESTINATIONS: [(&str, f64, f64); 3] = [
    ("healthy", 100.0, 100.0),
    ("slow", 18.0, 20.0),
    ("dead", 50.0, 50.0),
];

/// A receiver that accepts connections and never answers; returns its address.
pub(crate) async fn serve_dead() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream); // never read, never answered, never closed
        }
    });
    Ok(addr)
}

/// The three receivers: healthy, slow (20/s), dead.
pub(crate) struct Receivers {
    /// Name and URL of each.
    pub urls: [(String, String); 3],
}

/// Starts the three receivers on ports the system picks.
pub(crate) async fn start_receivers() -> std::io::Result<Receivers> {
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let healthy = receiver::Receiver::new(5_000.0);
    let slow = receiver::Receiver::new(20.0);
    let h = receiver::serve(any, healthy).await?;
    let s = receiver::serve(any, slow).await?;
    let d = serve_dead().await?;
    Ok(Receivers {
        urls: [
            ("healthy".into(), format!("http://{h}/hooks")),
            ("slow".into(), format!("http://{s}/hooks")),
            ("dead".into(), format!("http://{d}/hooks")),
        ],
    })
}

/// What one destination's senders saw.
#[derive(Default, Debug, Clone)]
pub(crate) struct Sent {
    /// Requests sent.
    pub sent: u64,
    /// Answered 202.
    pub accepted: u64,
    /// Answered 503.
    pub refused_503: u64,
    /// 503s that carried a `Retry-After`.
    pub with_retry_after: u64,
    /// Any other answer.
    pub other: u64,
}

/// POSTs `per_second` webhooks a second for `seconds` to each destination
/// (named with `header`), concurrently.
pub(crate) async fn flood(
    addr: SocketAddr,
    header: &str,
    names: &[&str],
    per_second: u32,
    seconds: u32,
) -> HashMap<String, Sent> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default();
    let url = format!("http://{addr}/v1/webhooks/deliver");
    let period = Duration::from_secs(1) / per_second.max(1);
    let mut tick = interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    for n in 0..per_second * seconds {
        tick.tick().await;
        for name in names {
            let req = client
                .post(&url)
                .header(header, *name)
                .header("content-type", "application/json")
                .body(format!("{{\"event\":\"order.paid\",\"n\":{n}}}"));
            let name = name.to_string();
            tasks.push(tokio::spawn(async move {
                let answer = req.send().await.ok();
                let status = answer.as_ref().map_or(0, |r| r.status().as_u16());
                let after = answer
                    .as_ref()
                    .is_some_and(|r| r.headers().contains_key("retry-after"));
                (name, status, after)
            }));
        }
    }
    let mut out: HashMap<String, Sent> = HashMap::new();
    for t in tasks {
        let Ok((name, status, after)) = t.await else {
            continue;
        };
        let s = out.entry(name).or_default();
        s.sent += 1;
        match status {
            202 => s.accepted += 1,
            503 => {
                s.refused_503 += 1;
                s.with_retry_after += u64::from(after);
            }
            _ => s.other += 1,
        }
    }
    out
}

/// Floods the three destinations, waits for the healthy and slow queues
/// to drain, prints the table.
pub(crate) async fn run(
    addr: SocketAddr,
    set: &Destinations<Job>,
    header: &str,
    cap: usize,
    seconds: u32,
) -> Result<(), String> {
    say!("flooding healthy, slow (20/s) and dead at 40/s each for {seconds} s …");
    let sent = flood(addr, header, &["healthy", "slow", "dead"], 40, seconds).await;
    // The slow queue drains at its rate; the dead one waits on its breaker.
    for _ in 0..200 {
        let busy = ["healthy", "slow"]
            .iter()
            .filter_map(|n| set.stats(n))
            .any(|s| s.depth() > 0 || s.in_flight() > 0);
        if !busy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    say!(
        "\n{:<8} {:>6} {:>9} {:>9} {:>10} {:>14} {:>8} {:>10}",
        "",
        "sent",
        "accepted",
        "503",
        "delivered",
        "dead-lettered",
        "queued",
        "breaker"
    );
    for name in ["healthy", "slow", "dead"] {
        let s = sent.get(name).cloned().unwrap_or_default();
        let Some(d) = set.stats(name) else {
            continue;
        };
        say!(
            "{:<8} {:>6} {:>9} {:>9} {:>10} {:>14} {:>8} {:>10}",
            name,
            s.sent,
            s.accepted,
            s.refused_503,
            d.delivered(),
            d.dead_lettered() + d.evicted(),
            d.held(),
            format!("{} ×{}", d.breaker().as_str(), d.breaker_opened()),
        );
    }
    say!(
        "\nthe dead receiver held at most its cap of {cap} deliveries; 503s for it carried Retry-After ({} of {})",
        sent.get("dead").map_or(0, |s| s.with_retry_after),
        sent.get("dead").map_or(0, |s| s.refused_503),
    );
    Ok(())
}
