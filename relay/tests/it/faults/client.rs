//! Client faults: connections trickling their heads or their bodies, and
//! requests with oversized headers, idempotency keys and tenant names, all
//! while normal clients post. The hostile ones are cut or refused; the
//! normal ones' webhooks keep the invariant.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinSet;

use super::invariant::Row;
use super::rx::{Plan, Rx};
use super::scenario::{Rss, Setup, kept, post, settle, start, stop};
use super::{Fault, N};
use crate::harness::http;
use crate::intake_clients::trickle;
use crate::raw::head;

/// Hostile connections or requests per run.
const HOSTILE: usize = 40;

/// How long a trickling connection may stay open before it counts as not
/// cut (the relay's read timeouts are 1 s and 2 s).
const CUT_WITHIN: Duration = Duration::from_secs(15);

/// The client faults.
pub(super) fn faults() -> Vec<Fault> {
    vec![
        Fault::new("client slow headers", |n, _| {
            Box::pin(run(n, Hostile::SlowHead))
        }),
        Fault::new("client slow body", |n, _| {
            Box::pin(run(n, Hostile::SlowBody))
        }),
        Fault::new("client oversized headers/keys", |n, _| {
            Box::pin(run(n, Hostile::Oversized))
        }),
    ]
}

/// What the hostile clients do.
#[derive(Clone, Copy)]
enum Hostile {
    /// Send a head a byte every 200 ms.
    SlowHead,
    /// Send a whole head announcing 1,000 bytes, then a byte every 200 ms.
    SlowBody,
    /// Send 10 KB idempotency keys, 10 KB tenant names and 60 KB headers.
    Oversized,
}

/// Starts [`HOSTILE`] hostile clients, posts [`N`] normal webhooks beside
/// them, lets the relay settle, and counts the normal ones.
async fn run(name: &'static str, hostile: Hostile) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(Plan::Ok).await;
    let rss = Rss::default();
    let mut relay = start(&setup.args(&rx.url(), ""), &rss).await;
    let mut clients = JoinSet::new();
    for i in 0..HOSTILE {
        let addr = relay.addr;
        clients.spawn(async move { (i, attack(addr, hostile, i).await) });
    }
    let posted = post(relay.addr, name, 0, N).await;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(done) = clients.join_next().await {
        let (_, outcome) = done.expect("a hostile client");
        *outcomes.entry(outcome).or_default() += 1;
    }
    settle(&setup, &posted.accepted, || rx.delivered()).await;
    stop(&mut relay).await;
    let row = Row::count(
        name,
        &posted.accepted,
        &rx.delivered(),
        &setup.dead_lettered(),
        &kept(&setup.journal),
        rss.peak_kib(),
    );
    let outcomes: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o}×{n}")).collect();
    row.note(format!(
        "normal answers {}; hostile: {}",
        posted.summary(),
        outcomes.join(" ")
    ))
}

/// Hostile client `i`'s attempt: what became of it (`cut`, `open`, or the
/// status it was answered).
async fn attack(addr: SocketAddr, hostile: Hostile, i: usize) -> String {
    let trickled = |first: String| async move {
        match trickle(addr, first, b'a', CUT_WITHIN).await {
            true => "cut".to_owned(),
            false => "open".to_owned(),
        }
    };
    match hostile {
        Hostile::SlowHead => trickled(head("x-slow: ")).await,
        Hostile::SlowBody => trickled(head("content-length: 1000\r\n\r\n")).await,
        Hostile::Oversized => {
            let big = |n: usize| format!("k{i}-{}", "x".repeat(n));
            let (header, value) = match i % 3 {
                0 => ("idempotency-key", big(10_000)),
                1 => ("x-tenant", big(10_000)),
                _ => ("x-junk", big(60_000)),
            };
            let sent = http()
                .post(format!("http://{addr}/v1/webhooks/deliver"))
                .header(header, value)
                .body(format!("{{\"hostile\":{i}}}"))
                .send()
                .await;
            match sent {
                Ok(resp) => format!("{header} {}", resp.status().as_u16()),
                Err(_) => format!("{header} closed"),
            }
        }
    }
}
