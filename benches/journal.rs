//! The journal's cost: jobs admitted per second through
//! `try_submit_durable` with 1, 8 and 64 producers, journal off (the same
//! throttle in memory), `Durability::Written` and `Durability::Sync` (group
//! commit: one `fsync` per batch), in one run. Each admitted job is also
//! delivered to a no-op downstream, so its end is journaled too.
//!
//! After the criterion lines it prints, per producer count, jobs/s and
//! fsyncs/s for one timed run of 20,000 jobs each, and the jobs per fsync.
//! The directory is under the system's temp dir (`TMPDIR` to move it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use dripfeed::journal::{Durability, Journal};
use dripfeed::{Delivery, Throttle};

/// Jobs per timed iteration, split among the producers.
const JOBS: usize = 4096;

#[derive(Clone, Copy, Debug)]
enum Mode {
    Memory,
    Written,
    Sync,
}

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "dripfeed-bench-journal-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn throttle(mode: Mode, tag: &str) -> Throttle<Vec<u8>> {
    let mut b = Throttle::builder()
        .drain_rate(10_000_000.0)
        .capacity(1 << 16)
        .max_in_flight(1024);
    let durability = match mode {
        Mode::Memory => None,
        Mode::Written => Some(Durability::Written),
        Mode::Sync => Some(Durability::Sync),
    };
    if let Some(d) = durability {
        let journal = Journal::options()
            .durability(d)
            .open(dir(tag))
            .expect("journal");
        b = b.journal(journal);
    }
    let (t, _drain) = b
        .build(|_: &Vec<u8>, _| async { Delivery::Done })
        .expect("throttle");
    t
}

/// `jobs` admissions split among `producers` tasks; the time they took.
async fn admit(t: &Throttle<Vec<u8>>, producers: usize, jobs: usize) -> Duration {
    let body = Arc::new(vec![b'x'; 200]); // a small webhook
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..producers {
        let (t, body) = (t.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..jobs / producers {
                let mut job = body.to_vec();
                while let Err(refused) = t.try_submit_durable(job).await {
                    job = refused.into_job();
                    tokio::task::yield_now().await; // full: the drain catches up
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("journal_admit");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for producers in [1, 8, 64] {
        for mode in [Mode::Memory, Mode::Written, Mode::Sync] {
            let tag = format!("{mode:?}-{producers}");
            let t = rt.block_on(async { throttle(mode, &tag) });
            g.throughput(criterion::Throughput::Elements(JOBS as u64));
            g.bench_function(format!("{mode:?}/{producers}_producers"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += admit(&t, producers, JOBS).await;
                        }
                        total
                    })
                })
            });
            rt.block_on(async { t.shutdown(Duration::from_secs(5)).await });
            let _ = std::fs::remove_dir_all(dir(&tag));
        }
    }
    g.finish();

    println!("\njournal, Durability::Sync: one run of 20,000 jobs per producer count");
    println!("| producers | jobs/s | fsyncs/s | jobs per fsync |");
    println!("|---|---|---|---|");
    for producers in [1, 8, 64] {
        let tag = format!("report-{producers}");
        let t = rt.block_on(async { throttle(Mode::Sync, &tag) });
        let journal = t.journal().expect("journal").clone();
        let before = journal.stats().fsyncs;
        let took = rt.block_on(admit(&t, producers, 20_000));
        let fsyncs = journal.stats().fsyncs - before;
        let secs = took.as_secs_f64();
        println!(
            "| {producers} | {:.0} | {:.0} | {:.1} |",
            20_000.0 / secs,
            fsyncs as f64 / secs,
            20_000.0 / fsyncs.max(1) as f64
        );
        rt.block_on(async { t.shutdown(Duration::from_secs(5)).await });
        drop(t);
        let _ = std::fs::remove_dir_all(dir(&tag));
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
