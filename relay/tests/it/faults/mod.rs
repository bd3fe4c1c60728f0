//! The fault-injection suite: a loop over faults, each run on a
//! relay of its own (its own ports, journal and dead-letter file, a 1 s
//! deliver timeout and an 8 MiB queue budget), a few at a time. Each run
//! posts numbered webhooks, applies its fault, lets the relay settle
//! (bounded), stops it and checks the invariant (see [`invariant`]): every
//! webhook answered 202 is delivered, dead-lettered or still in the
//! journal, and the relay's memory stayed within its bound. It prints a
//! table of fault → accepted, delivered, dead-lettered, kept, lost.
//!
//! The process faults draw their moments from a seeded generator; the seed
//! is printed, and `DRIPFEED_FAULT_SEED` replays one. Faults that need
//! root (a tmpfs mount, an unprivileged user) skip outside CI when they
//! cannot have it, and fail under `CI=true`.
//!
//! `cargo test -p dripfeed-relay --all-features --test it faults -- --nocapture`

mod client;
mod disk;
mod invariant;
mod process;
mod receiver;
mod rx;
mod scenario;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use invariant::{RSS_BOUND_KIB, Row};

/// Webhooks each run posts (before its fault, and after when it has two
/// phases: each phase posts half).
pub(crate) const N: u64 = 40;

/// Runs at once.
const AT_ONCE: usize = 4;

/// The whole suite's bound.
const SUITE: Duration = Duration::from_secs(300);

/// A fault's run: given its name and the suite's seed, its row.
pub(crate) type Run = fn(&'static str, u64) -> Pin<Box<dyn Future<Output = Row> + Send>>;

/// One fault of the suite.
pub(crate) struct Fault {
    /// Its name (the table's first column).
    pub name: &'static str,
    /// What applies it and counts.
    pub run: Run,
}

impl Fault {
    /// The fault `name`, run by `run`.
    pub(crate) fn new(name: &'static str, run: Run) -> Fault {
        Fault { name, run }
    }
}

/// The seed: `DRIPFEED_FAULT_SEED`, else a fresh one.
fn seed() -> u64 {
    std::env::var("DRIPFEED_FAULT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| fastrand::u64(..))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_202_is_delivered_dead_lettered_or_kept_under_each_fault() {
    let seed = seed();
    println!("faults: seed {seed} (DRIPFEED_FAULT_SEED={seed} replays it)");
    let began = Instant::now();
    let faults: Vec<Fault> = [
        receiver::faults(),
        disk::faults(),
        process::faults(),
        client::faults(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let slots = Arc::new(Semaphore::new(AT_ONCE));
    let mut runs = JoinSet::new();
    for (i, fault) in faults.iter().enumerate() {
        let (slots, name, run) = (slots.clone(), fault.name, fault.run);
        runs.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("a slot");
            let t = Instant::now();
            let row = run(name, seed).await;
            println!("faults: {name}: done in {:.1} s", t.elapsed().as_secs_f64());
            (i, row)
        });
    }
    let mut rows: Vec<Option<Row>> = vec![None; faults.len()];
    while let Some(done) = runs.join_next().await {
        if let Ok((i, row)) = done {
            rows[i] = Some(row);
        }
    }
    // A run that panicked (its message is above) is a row that fails.
    let rows: Vec<Row> = rows
        .into_iter()
        .zip(&faults)
        .map(|(row, f)| row.unwrap_or_else(|| Row::panicked(f.name)))
        .collect();
    let took = began.elapsed();
    println!(
        "faults: seed {seed}, {} faults in {:.1} s (RSS bound {:.0} MiB)\n{}",
        rows.len(),
        took.as_secs_f64(),
        RSS_BOUND_KIB as f64 / 1024.0,
        invariant::table(&rows)
    );
    let broken: Vec<&str> = rows
        .iter()
        .filter(|r| !r.holds())
        .map(|r| r.fault)
        .collect();
    assert!(
        broken.is_empty(),
        "the invariant broke under {broken:?} (seed {seed})"
    );
    let idle: Vec<&str> = rows
        .iter()
        .filter(|r| r.accepted == 0 && !r.note.starts_with("skipped"))
        .map(|r| r.fault)
        .collect();
    assert!(idle.is_empty(), "no webhook was accepted under {idle:?}");
    assert!(took < SUITE, "the suite took {took:?}");
}
