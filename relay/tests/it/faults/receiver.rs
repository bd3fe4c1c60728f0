//! Receiver faults: it hangs, answers 5xx, 429 with `Retry-After`, closes
//! the connection, redirects, answers slowly (below the deliver timeout)
//! or after it. The relay retries what may succeed later, dead-letters
//! what will not, and keeps in the journal what it is still trying.

use super::invariant::Row;
use super::rx::{Plan, Rx};
use super::scenario::{Rss, Setup, kept, post, settle, start, stop};
use super::{Fault, N};

/// The receiver faults.
pub(super) fn faults() -> Vec<Fault> {
    vec![
        Fault::new("receiver hangs", |n, _| Box::pin(run(n, Plan::Hang))),
        Fault::new("receiver answers 5xx", |n, _| {
            Box::pin(run(n, Plan::Fail5xx))
        }),
        Fault::new("receiver 429 Retry-After", |n, _| {
            Box::pin(run(n, Plan::TooMany))
        }),
        Fault::new("receiver closes", |n, _| Box::pin(run(n, Plan::Close))),
        Fault::new("receiver redirects", |n, _| {
            Box::pin(run(n, Plan::Redirect))
        }),
        Fault::new("receiver slow (0.4 s)", |n, _| Box::pin(run(n, Plan::Slow))),
        Fault::new("receiver late (1.5 s)", |n, _| Box::pin(run(n, Plan::Late))),
    ]
}

/// Posts [`N`] webhooks to a relay delivering to a receiver answering as
/// `plan` says, lets it settle, stops it, and counts.
async fn run(name: &'static str, plan: Plan) -> Row {
    let setup = Setup::new(name);
    let rx = Rx::start(plan).await;
    let rss = Rss::default();
    let mut relay = start(&setup.args(&rx.url(), ""), &rss).await;
    let posted = post(relay.addr, name, 0, N).await;
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
    let followed = match rx.followed() {
        0 => String::new(),
        f => format!(", {f} redirects followed"),
    };
    row.note(format!("answers {}{followed}", posted.summary()))
}
