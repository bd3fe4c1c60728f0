//! Load from the outside: a burst of POSTs at a steady pace, and what the
//! relay answered to each.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::{MissedTickBehavior, interval};

use crate::harness::http;

/// What a burst saw.
#[derive(Default, Debug)]
pub(crate) struct Burst {
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
    /// (status, Retry-After seconds) of each answer that carried one.
    pub retry_after: Vec<(u16, u64)>,
    /// Requests that got no answer.
    pub errors: u64,
    /// The ids the 202s named.
    pub accepted_ids: Vec<String>,
    /// Each answered request's number and status, in sending order.
    pub answers: Vec<(u64, u16)>,
}

impl Burst {
    /// Answers with `status`.
    pub(crate) fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// The Retry-After values sent with `status`.
    pub(crate) fn waits(&self, status: u16) -> Vec<u64> {
        self.retry_after
            .iter()
            .filter(|(s, _)| *s == status)
            .map(|(_, w)| *w)
            .collect()
    }
}

/// Sends `per_second` POSTs a second for `seconds` to the relay at `addr`;
/// `headers(n)` gives the n-th request's extra headers (tenant, destination).
pub(crate) async fn burst(
    addr: SocketAddr,
    per_second: u32,
    seconds: u32,
    headers: impl Fn(u64) -> Vec<(&'static str, String)>,
) -> Burst {
    let client = http();
    let url = format!("http://{addr}/v1/webhooks/deliver");
    let mut tick = interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    let mut n = 0u64;
    for t in 0..u64::from(seconds) * 100 {
        tick.tick().await;
        // Exactly per_second a second, spread over the 10 ms ticks.
        let due = (t + 1) * u64::from(per_second) / 100 - t * u64::from(per_second) / 100;
        for _ in 0..due {
            let mut req = client
                .post(&url)
                .header("content-type", "application/json")
                .body(format!("{{\"event\":\"order.paid\",\"n\":{n}}}"));
            for (k, v) in headers(n) {
                req = req.header(k, v);
            }
            n += 1;
            let nth = n - 1;
            tasks.push(tokio::spawn(async move {
                let resp = req.send().await.ok()?;
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
                Some((nth, status, after, id))
            }));
        }
    }
    let mut out = Burst::default();
    for t in tasks {
        match t.await.ok().flatten() {
            Some((nth, status, after, id)) => {
                out.answers.push((nth, status));
                *out.statuses.entry(status).or_default() += 1;
                out.retry_after.extend(after.map(|a| (status, a)));
                out.accepted_ids.extend(id.filter(|_| status == 202));
            }
            None => out.errors += 1,
        }
    }
    out
}
