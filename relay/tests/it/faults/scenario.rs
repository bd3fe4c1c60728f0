//! What every fault's run shares: its directory (a journal and a
//! dead-letter file), the relay's flags (1 s deliver timeout, 8 MiB queue
//! budget, short retries), posting numbered webhooks and keeping the ids
//! answered 202, the relay's peak resident memory, waiting for it to
//! settle, and stopping it.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::harness::{Relay, TempDir, argv, eventually, http};
use crate::letters;

/// The relay's `--deliver-timeout`.
pub(super) const DELIVER_TIMEOUT: Duration = Duration::from_secs(1);

/// The relay's `--max-queue-bytes` (8 MiB).
pub(super) const MAX_QUEUE_BYTES: u64 = 8 << 20;

/// How long a run waits for every webhook to be delivered or dead-lettered
/// before it stops the relay (what is left stays in the journal).
pub(super) const SETTLE: Duration = Duration::from_secs(20);

/// A run stops waiting sooner once no webhook has ended for this long (a
/// hanging receiver behind an open breaker ends none): longer than an
/// attempt (1 s), a retry's backoff (at most 500 ms) and a poll together.
pub(super) const QUIET: Duration = Duration::from_secs(4);

/// One fault's places: a directory with `journal/` and
/// `dead-letter.jsonl` (unless the dead-letter file lives elsewhere).
pub(super) struct Setup {
    /// The fault's name, in bodies and the table.
    pub name: &'static str,
    /// Its directory, removed when dropped.
    pub dir: TempDir,
    /// The journal directory.
    pub journal: PathBuf,
    /// The dead-letter file.
    pub dead_letter: PathBuf,
}

impl Setup {
    /// A fresh directory for `name`.
    pub(super) fn new(name: &'static str) -> Setup {
        let tag: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = TempDir::new(&format!("fault-{tag}"));
        let (journal, dead_letter) = (dir.join("journal"), dir.join("dead-letter.jsonl"));
        Setup {
            name,
            dir,
            journal,
            dead_letter,
        }
    }

    /// The suite's flags for a relay delivering to `url`, then `extra`.
    pub(super) fn args(&self, url: &str, extra: &str) -> Vec<String> {
        argv(&format!(
            "--downstream {url} --deliver-timeout 1s --max-queue-bytes {MAX_QUEUE_BYTES} \
             --retries 2 --retry-min 50ms --retry-max 500ms --shutdown-grace 1s \
             --header-read-timeout 1s --body-read-timeout 2s \
             --journal-dir {} --dead-letter-file {} {extra}",
            self.journal.display(),
            self.dead_letter.display()
        ))
    }

    /// The ids in the dead-letter file now.
    pub(super) fn dead_lettered(&self) -> HashSet<String> {
        letters::ids_in(&[&self.dead_letter])
    }
}

/// What posting saw: the ids answered 202, and every answer by status
/// (0: no answer).
#[derive(Default, Debug, Clone)]
pub(super) struct Posted {
    /// Ids answered 202.
    pub accepted: Vec<String>,
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
}

impl Posted {
    /// Adds `other`'s answers to these.
    pub(super) fn extend(&mut self, other: Posted) {
        self.accepted.extend(other.accepted);
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
    }

    /// The statuses as `202×40 503×3`.
    pub(super) fn summary(&self) -> String {
        let parts: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}×{n}"))
            .collect();
        parts.join(" ")
    }
}

/// POSTs webhooks `from..to` of fault `name` (`{"fault":name,"n":N}`) to
/// the relay at `addr`, four at a time; a request the relay does not
/// answer (it died) counts as status 0.
pub(super) async fn post(addr: std::net::SocketAddr, name: &str, from: u64, to: u64) -> Posted {
    let client = http();
    let next = Arc::new(AtomicU64::new(from));
    let mut senders = JoinSet::new();
    for _ in 0..4 {
        let (client, next, name) = (client.clone(), next.clone(), name.to_owned());
        senders.spawn(async move {
            let mut seen = Posted::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= to {
                    return seen;
                }
                let (status, id) = post_one(&client, addr, &name, n).await;
                *seen.statuses.entry(status).or_default() += 1;
                seen.accepted.extend(id);
            }
        });
    }
    let mut all = Posted::default();
    while let Some(seen) = senders.join_next().await {
        all.extend(seen.expect("a sender"));
    }
    all
}

/// POSTs webhook `n`: its status (0: no answer) and a 202's id.
async fn post_one(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    name: &str,
    n: u64,
) -> (u16, Option<String>) {
    let body = format!("{{\"fault\":\"{name}\",\"n\":{n}}}");
    let sent = client
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .header("content-type", "application/json")
        .timeout(Duration::from_secs(10))
        .body(body)
        .send()
        .await;
    let Ok(resp) = sent else {
        return (0, None);
    };
    let status = resp.status().as_u16();
    // A 202 counts only once its body (and id) is read: a relay killed
    // between its head and its body made no promise the client heard.
    let Ok(text) = resp.text().await else {
        return (0, None);
    };
    let id = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_owned));
    match (status, id) {
        (202, Some(id)) => (202, Some(id)),
        (202, None) => (0, None),
        (s, _) => (s, None),
    }
}

/// The relays' peak resident memory over a run (KiB), sampled every 50 ms
/// from `/proc/PID/status` (`VmRSS`) while each one lives.
#[derive(Clone, Default)]
pub(super) struct Rss(Arc<AtomicU64>);

impl Rss {
    /// Samples `relay` until it exits.
    pub(super) fn watch(&self, relay: &Relay) {
        let (peak, path) = (self.0.clone(), format!("/proc/{}/status", relay.pid()));
        tokio::spawn(async move {
            while let Ok(text) = std::fs::read_to_string(&path) {
                let kib = text
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
                match kib {
                    Some(kib) => peak.fetch_max(kib, Ordering::Relaxed),
                    None => break, // a zombie: it has exited
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }

    /// The peak so far, KiB.
    pub(super) fn peak_kib(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Starts the relay with `args` (after `--listen 127.0.0.1:0`) and has
/// `rss` watch it.
pub(super) async fn start(args: &[String], rss: &Rss) -> Relay {
    let relay = Relay::start_with(args, &[]).await;
    rss.watch(&relay);
    relay
}

/// Waits (at most [`SETTLE`]) until every id of `accepted` is delivered
/// (`delivered()`) or in the dead-letter file, or none has ended for
/// [`QUIET`].
pub(super) async fn settle(
    setup: &Setup,
    accepted: &[String],
    delivered: impl Fn() -> HashSet<String>,
) {
    let mut last = (usize::MAX, std::time::Instant::now());
    eventually(SETTLE, || {
        let (done, dead) = (delivered(), setup.dead_lettered());
        let ended = accepted
            .iter()
            .filter(|id| done.contains(*id) || dead.contains(*id))
            .count();
        if ended != last.0 {
            last = (ended, std::time::Instant::now());
        }
        let settled = ended == accepted.len() || last.1.elapsed() >= QUIET;
        async move { settled }
    })
    .await;
}

/// SIGTERM, and the exit (within 30 s): what was not delivered within the
/// grace stays in the journal.
pub(super) async fn stop(relay: &mut Relay) {
    relay.signal("TERM");
    relay.exit(Duration::from_secs(30)).await;
}

/// The ids still in the journal at `dir`, opened with the library once the
/// relay has exited (none if there is no journal there).
pub(super) fn kept(dir: &Path) -> HashSet<String> {
    if !dir.exists() {
        return HashSet::new();
    }
    let journal = dripfeed::journal::Journal::open(dir)
        .unwrap_or_else(|e| panic!("opening the journal {}: {e}", dir.display()));
    let ids = journal
        .take_recovered()
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    drop(journal);
    ids
}
