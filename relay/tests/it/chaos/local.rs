//! One relay on its local journal under chaos: while the client posts and
//! the receiver flaps, the relay is SIGKILLed every 3 to 8 s and started
//! again on the same journal and dead-letter file, and once (with a tmpfs
//! to fill, as root) its journal's disk is full for 4 s while it runs, no
//! kill coming until 1.5 s after it is freed (what was delivered while it
//! was full is recorded ended then: a kill before repeats it). (A
//! relay started while its journal's disk is full exits 1, naming the
//! segment it cannot write, for its supervisor to start it again: it is
//! not killed during that episode.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::check::{self, HEAD};
use super::client::{self, Targets};
use super::rx::{Flapping, Mode};
use crate::full_disk::FullDisk;
use crate::harness::{Relay, TempDir, argv};
use crate::letters;

const RATE: usize = 20;
const POSTED: u32 = 12;
const IN_FLIGHT: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_through_minutes_of_chaos_loses_nothing() {
    let Some((length, mut rng)) = check::begin("local") else {
        return;
    };
    let rx = Flapping::start().await;
    let dir = TempDir::new("chaos-local");
    let disk = FullDisk::new("chaos-local-journal", "64m", "journal");
    let journal = match &disk {
        Some(d) if d.is_tmpfs() => d.arg("journal"),
        _ => dir.arg("journal"),
    };
    let dead_letter = dir.join("dl.jsonl");
    let args = argv(&format!(
        "--destination hooks=http://{}/hooks --drain-rate {RATE} --latency-budget 120s \
         --deliver-timeout 1s --retries 40 --retry-min 200ms --retry-max 2s \
         --breaker-max-cool-down 2s --max-in-flight-per-destination {IN_FLIGHT} \
         --shutdown-grace 2s --journal-dir {journal} --dead-letter-file {}",
        rx.addr,
        dead_letter.display(),
    ));
    let mut relay = Some(Relay::start_with(&args, &[]).await);
    let targets: Targets = Arc::new(Mutex::new(vec![relay.as_ref().map(|r| r.addr)]));
    let start = Instant::now();
    let (stop_tx, stop_rx) = watch::channel(false);
    let client = tokio::spawn(client::post(targets.clone(), POSTED, stop_rx));

    let (mut kills, mut moods, mut full) = (0, 0, 0);
    let mut log: Vec<(u64, String)> = Vec::new();
    let mut back_at: Option<Instant> = None;
    let mut freed_at: Option<Instant> = None;
    let mut next_kill = Instant::now() + Duration::from_millis(rng.u64(3000..8000));
    let mut next_mood = Instant::now() + Duration::from_secs(2);
    let fill_at = start + length / 2;
    while start.elapsed() < length {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        if let Some(at) = back_at
            && at <= now
        {
            let r = Relay::start_with(&args, &[]).await;
            log.push((check::ms(start), "started".into()));
            targets.lock().unwrap()[0] = Some(r.addr);
            relay = Some(r);
            back_at = None;
        }
        if let Some(at) = freed_at
            && at <= now
            && let Some(d) = &disk
        {
            d.free();
            log.push((check::ms(start), "disk freed".into()));
            freed_at = None;
            // The ends of what was delivered while the disk was full are
            // written within half a second of its freeing: a kill before
            // that repeats those deliveries, as at-least-once allows, but
            // beyond the bound this run checks (faults × in flight).
            next_kill = next_kill.max(now + Duration::from_millis(1500));
        }
        // The disk fills while the relay runs (a relay started on a full
        // journal disk exits: see below), and no kill comes while it is.
        if full == 0
            && now >= fill_at
            && relay.is_some()
            && let Some(d) = disk.as_ref().filter(|d| d.is_tmpfs())
        {
            d.fill();
            log.push((check::ms(start), "disk full".into()));
            full += 1;
            freed_at = Some(now + Duration::from_secs(4));
        }
        if now >= next_kill
            && freed_at.is_none()
            && let Some(mut r) = relay.take()
        {
            targets.lock().unwrap()[0] = None;
            log.push((check::ms(start), "kill".into()));
            r.kill().await;
            kills += 1;
            back_at = Some(now + Duration::from_millis(rng.u64(300..1500)));
            next_kill = now + Duration::from_millis(rng.u64(3000..8000));
        }
        if now >= next_mood {
            let mode = Mode::ALL[rng.usize(0..Mode::ALL.len())];
            rx.set(mode);
            log.push((check::ms(start), format!("{mode:?}")));
            moods += 1;
            next_mood = now + Duration::from_millis(rng.u64(2000..5000));
        }
    }
    let _ = stop_tx.send(true);
    if let (Some(_), Some(d)) = (freed_at, &disk) {
        d.free();
    }
    if relay.is_none() {
        relay = Some(Relay::start_with(&args, &[]).await);
    }
    rx.set(Mode::Ok);
    let answers = client.await.expect("the client");
    let settle = Instant::now();
    let mut dead = Default::default();
    while settle.elapsed() < Duration::from_secs(120) + length / 2 {
        dead = letters::ids_in(&[&dead_letter]);
        if check::settled(&answers, &rx.arrivals(), &dead) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // What the journal still holds once the relay is gone: queued, not
    // lost (read before the disk is unmounted).
    if let Some(mut r) = relay {
        r.kill().await;
    }
    let kept = journal_ids(std::path::Path::new(&journal));
    let mut t = check::count(&answers, &rx.arrivals(), &dead, &kept, start);
    t.faults = vec![("kill", kills), ("full disk", full), ("mood", moods)];
    t.log = log;
    eprintln!(
        "chaos (local), settled in {:?}:\n{HEAD}\n{}",
        settle.elapsed(),
        t.line("local", length.as_secs())
    );
    check::hold("local", &t, IN_FLIGHT, RATE + 2);
}

/// The ids the journal at `dir` still holds (none if there is none).
fn journal_ids(dir: &std::path::Path) -> std::collections::HashSet<String> {
    if !dir.exists() {
        return Default::default();
    }
    let journal = dripfeed::journal::Journal::open(dir)
        .unwrap_or_else(|e| panic!("opening the journal {}: {e}", dir.display()));
    journal
        .take_recovered()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect()
}
