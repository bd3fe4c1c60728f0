//! The journal's cost: jobs admitted per second through
//! `submit_timeout` (no wait for room) with 1, 8 and 64 producers, journal off (the same
//! throttle in memory), `Durability::Written` and `Durability::Sync` (group
//! commit: one `fsync` per batch), in one run. Each admitted job is also
//! delivered to a no-op downstream, so its end is journaled too.
//!
//! After the criterion lines it prints, per producer count, jobs/s and
//! fsyncs/s for one timed run of 20,000 jobs each, and the jobs per fsync.
//! The directory is under the system's temp dir (`TMPDIR` to move it).
//!
//! The peer store: `Redb/*` is redb (an embedded B-tree, `Durability::Immediate`)
//! behind the same group commit as ours (one writer thread, one write
//! transaction per batch of waiting jobs, each job inserted, then removed
//! when it ends), so the lines compare the storage engines, not the batching.

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

/// redb behind a group-committing writer thread, as our journal has.
mod redb_log {
    use redb::{Database, Durability, TableDefinition};
    use tokio::sync::{mpsc, oneshot};

    const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");

    enum Cmd {
        Admit(u64, Vec<u8>, oneshot::Sender<()>),
        End(u64),
    }

    /// Opens `path` after a crash: (rows found, acknowledged ids missing).
    pub(crate) fn present(path: &std::path::Path, acked: &[u64]) -> (usize, usize) {
        use redb::ReadableTableMetadata;
        let db = Database::create(path).expect("reopen");
        let r = db.begin_read().expect("read");
        let t = r.open_table(JOBS).expect("table");
        let found = t.len().expect("len") as usize;
        let missing = acked
            .iter()
            .filter(|id| t.get(**id).ok().flatten().is_none())
            .count();
        (found, missing)
    }

    #[derive(Clone)]
    pub(crate) struct RedbLog {
        tx: mpsc::UnboundedSender<Cmd>,
        pub commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl RedbLog {
        pub(crate) fn open(path: &std::path::Path) -> RedbLog {
            let db = Database::create(path).expect("redb");
            let (tx, mut rx) = mpsc::unbounded_channel::<Cmd>();
            let commits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let counted = commits.clone();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                while let Some(first) = rx.blocking_recv() {
                    batch.push(first);
                    while batch.len() < 8192 {
                        match rx.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    let mut w = db.begin_write().expect("write");
                    w.set_durability(Durability::Immediate);
                    let mut acks = Vec::new();
                    {
                        let mut t = w.open_table(JOBS).expect("table");
                        for cmd in batch.drain(..) {
                            match cmd {
                                Cmd::Admit(id, bytes, ack) => {
                                    t.insert(id, bytes.as_slice()).expect("insert");
                                    acks.push(ack);
                                }
                                Cmd::End(id) => {
                                    t.remove(id).expect("remove");
                                }
                            }
                        }
                    }
                    w.commit().expect("commit");
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    for a in acks {
                        let _ = a.send(());
                    }
                }
            });
            RedbLog { tx, commits }
        }

        /// Records a job and waits until it is durable (never ends it).
        pub(crate) async fn admit_only(&self, id: u64, bytes: Vec<u8>) {
            let (ack, done) = oneshot::channel();
            let _ = self.tx.send(Cmd::Admit(id, bytes, ack));
            let _ = done.await;
        }

        /// Records a job and waits until it is durable; then ends it.
        pub(crate) async fn admit_and_end(&self, id: u64, bytes: Vec<u8>) {
            let (ack, done) = oneshot::channel();
            let _ = self.tx.send(Cmd::Admit(id, bytes, ack));
            let _ = done.await;
            let _ = self.tx.send(Cmd::End(id));
        }
    }
}

/// `jobs` redb admissions split among `producers` tasks.
async fn admit_redb(log: &redb_log::RedbLog, producers: usize, jobs: usize) -> Duration {
    let log = log.clone();
    spread(producers, jobs, move |p, i| {
        let log = log.clone();
        async move {
            log.admit_and_end(((p as u64) << 40) | i as u64, vec![b'x'; 200])
                .await
        }
    })
    .await
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
    let t = t.clone();
    spread(producers, jobs, move |_, _| {
        let t = t.clone();
        async move {
            let mut job = vec![b'x'; 200]; // a small webhook
            while let Err(refused) = t.submit_timeout(job, std::time::Duration::ZERO).await {
                job = refused.into_job();
                tokio::task::yield_now().await; // full: the drain catches up
            }
        }
    })
    .await
}

/// `producers` tasks, producer `p` running `one(p, i)` for each of its
/// `jobs / producers` jobs in turn; the time they all took.
async fn spread<F, Fut>(producers: usize, jobs: usize, one: F) -> Duration
where
    F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let one = one.clone();
            tokio::spawn(async move {
                for i in 0..jobs / producers {
                    one(p, i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    start.elapsed()
}

/// Criterion's `iter_custom` over `run`, on the bench's runtime.
fn timed<Fut>(rt: &tokio::runtime::Runtime, iters: u64, run: impl Fn() -> Fut) -> Duration
where
    Fut: std::future::Future<Output = Duration>,
{
    rt.block_on(async {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            total += run().await;
        }
        total
    })
}

/// One report row: jobs/s, flushes (fsyncs or commits)/s, jobs per flush.
fn row(producers: usize, jobs: usize, took: Duration, flushes: u64) {
    let secs = took.as_secs_f64();
    println!(
        "| {producers} | {:.0} | {:.0} | {:.1} |",
        jobs as f64 / secs,
        flushes as f64 / secs,
        jobs as f64 / flushes.max(1) as f64
    );
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
                b.iter_custom(|iters| timed(&rt, iters, || admit(&t, producers, JOBS)))
            });
            rt.block_on(async { t.shutdown(Duration::from_secs(5)).await });
            let _ = std::fs::remove_dir_all(dir(&tag));
        }
        let redb_dir = dir(&format!("redb-{producers}"));
        std::fs::create_dir_all(&redb_dir).expect("dir");
        let log = rt.block_on(async { redb_log::RedbLog::open(&redb_dir.join("jobs.redb")) });
        g.bench_function(format!("Redb/{producers}_producers"), |b| {
            b.iter_custom(|iters| timed(&rt, iters, || admit_redb(&log, producers, JOBS)))
        });
        drop(log);
        let _ = std::fs::remove_dir_all(&redb_dir);
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
        row(producers, 20_000, took, journal.stats().fsyncs - before);
        rt.block_on(async { t.shutdown(Duration::from_secs(5)).await });
        drop(t);
        let _ = std::fs::remove_dir_all(dir(&tag));
    }
    println!("\nredb (Durability::Immediate), the same group commit: one run of 20,000 jobs");
    println!("| producers | jobs/s | commits/s | jobs per commit |");
    println!("|---|---|---|---|");
    for producers in [1, 8, 64] {
        let redb_dir = dir(&format!("redb-report-{producers}"));
        std::fs::create_dir_all(&redb_dir).expect("dir");
        let log = rt.block_on(async { redb_log::RedbLog::open(&redb_dir.join("jobs.redb")) });
        let before = log.commits.load(std::sync::atomic::Ordering::Relaxed);
        let took = rt.block_on(admit_redb(&log, producers, 20_000));
        let commits = log.commits.load(std::sync::atomic::Ordering::Relaxed) - before;
        row(producers, 20_000, took, commits);
        drop(log);
        let _ = std::fs::remove_dir_all(&redb_dir);
    }
}

/// Crash behaviour: this binary runs itself as a child that admits jobs
/// from 8 producers (printing each acknowledged id), is SIGKILLed after a
/// second, and the store is opened again: every acknowledged job must be
/// there; the time to open (recovery) is printed.
const CHILD: &str = "DRIPFEED_BENCH_JOURNAL_CHILD";

fn child(store: &str, path: &str) -> ! {
    use std::io::Write;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    rt.block_on(async {
        let mut tasks = Vec::new();
        if store == "redb" {
            let log = redb_log::RedbLog::open(std::path::Path::new(path));
            for p in 0..8u64 {
                let (log, out) = (log.clone(), out.clone());
                tasks.push(tokio::spawn(async move {
                    for i in 0.. {
                        let id = (p << 40) | i;
                        log.admit_only(id, vec![b'x'; 200]).await;
                        let _ = writeln!(out.lock().expect("stdout"), "{id}");
                    }
                }));
            }
        } else {
            let (t, _drain) = Throttle::builder()
                .drain_rate(1.0)
                .capacity(1 << 22)
                .journal(Journal::open(path).expect("journal"))
                .build(|_: &Vec<u8>, _| async { Delivery::Done })
                .expect("throttle");
            t.pause();
            for _ in 0..8 {
                let (t, out) = (t.clone(), out.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        if let Ok(a) = t
                            .submit_timeout(vec![b'x'; 200], std::time::Duration::ZERO)
                            .await
                        {
                            let _ = writeln!(out.lock().expect("stdout"), "{}", a.id());
                        }
                    }
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    std::process::exit(0)
}

fn crash(store: &str) {
    use std::io::BufRead;
    let base = dir(&format!("crash-{store}"));
    std::fs::create_dir_all(&base).expect("dir");
    let path = match store {
        "redb" => base.join("jobs.redb"),
        _ => base.join("journal"),
    };
    let mut kid = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env(CHILD, format!("{store}:{}", path.display()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child");
    let stdout = kid.stdout.take().expect("stdout");
    // Read as it comes: a full pipe would stall the child.
    let reader = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.parse::<u64>().ok())
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_secs(1));
    let _ = kid.kill(); // SIGKILL
    let _ = kid.wait();
    let acked = reader.join().unwrap_or_default();
    let start = Instant::now();
    let (found, missing) = match store {
        "redb" => redb_log::present(&path, &acked),
        _ => {
            let journal = Journal::open(&path).expect("reopen");
            let found = journal.recovered();
            (found, acked.len().saturating_sub(found))
        }
    };
    let opened = start.elapsed();
    println!(
        "| {store} | {} | {found} | {missing} | {:.1} ms |",
        acked.len(),
        opened.as_secs_f64() * 1000.0
    );
    let _ = std::fs::remove_dir_all(&base);
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        let (store, path) = spec.split_once(':').expect("store:path");
        child(store, path);
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    println!("\ncrash: SIGKILL after 1 s of 8 producers, then open again");
    println!(
        "| store | acknowledged | found at open | acknowledged but missing | open (recovery) |"
    );
    println!("|---|---|---|---|---|");
    crash("journal");
    crash("redb");
    c.final_summary();
}
