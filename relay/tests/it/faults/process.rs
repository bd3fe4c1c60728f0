//! Process faults: SIGKILL and SIGTERM at moments drawn from the suite's
//! seeded generator while webhooks are being posted and delivered (to a
//! receiver slow enough that some are in flight), each followed by a
//! restart on the same journal and dead-letter file.

use std::time::Duration;

use super::invariant::Row;
use super::rx::{Plan, Rx};
use super::scenario::{Posted, Rss, Setup, kept, post, settle, start, stop};
use super::{Fault, N};

/// Stops (and restarts) per run.
const ROUNDS: u64 = 3;

/// The process faults.
pub(super) fn faults() -> Vec<Fault> {
    vec![
        Fault::new("SIGKILL at random, restart", |n, seed| {
            Box::pin(run(n, seed, Signal::Kill))
        }),
        Fault::new("SIGTERM at random, restart", |n, seed| {
            Box::pin(run(n, seed, Signal::Term))
        }),
    ]
}

/// How a round ends the relay.
#[derive(Clone, Copy)]
enum Signal {
    Kill,
    Term,
}

/// [`ROUNDS`] rounds of: start the relay, post [`N`] webhooks, stop it with
/// `signal` at a moment drawn from the seeded generator (0 to 1.5 s into
/// the posting); then a last start that settles, and the count.
async fn run(name: &'static str, seed: u64, signal: Signal) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(Plan::Slow).await;
    let rss = Rss::default();
    let args = setup.args(&rx.url(), "");
    // One stream per fault, so each fault's moments hold whatever else runs.
    let mut rng = fastrand::Rng::with_seed(seed ^ u64::from(signal as u8 + 1).rotate_left(32));
    let mut posted = Posted::default();
    let mut moments = Vec::new();
    for round in 0..ROUNDS {
        let mut relay = start(&args, &rss).await;
        let (addr, from) = (relay.addr, round * N);
        let posting = tokio::spawn(post(addr, name, from, from + N));
        let at = Duration::from_millis(rng.u64(0..1500));
        moments.push(format!("{}ms", at.as_millis()));
        tokio::time::sleep(at).await;
        match signal {
            Signal::Kill => relay.kill().await,
            Signal::Term => stop(&mut relay).await,
        }
        posted.extend(posting.await.expect("the posting"));
    }
    let mut relay = start(&args, &rss).await;
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
    row.note(format!(
        "stopped at {} into each posting; answers {}",
        moments.join(", "),
        posted.summary()
    ))
}
