//! `Idempotency-Key`s from outside: a second relay on the same journal
//! directory leaves the first's keys alone; `idempotency.jsonl` stays
//! bounded while the relay runs and is read at start with bounded memory;
//! empty, blank and unreadable keys are refused with 400; keys are scoped
//! by tenant.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, http, run};
use crate::receivers::{self, Log};

/// A relay journaling in `dir/journal`, delivering to `rx`, with `extra` flags.
async fn relay(rx: SocketAddr, dir: &TempDir, extra: &str) -> Relay {
    Relay::start(&format!(
        "--downstream http://{rx}/hooks --drain-rate 5000 --latency-budget 2s \
         --journal-dir {} --dead-letter-file {} {extra}",
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl"),
    ))
    .await
}

/// POSTs `body` with raw header values; status and parsed body.
pub(crate) async fn post_raw(
    addr: SocketAddr,
    headers: &[(&str, &[u8])],
    body: &str,
) -> (u16, serde_json::Value) {
    let mut req = http()
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .body(body.to_owned());
    for (name, value) in headers {
        let value = reqwest::header::HeaderValue::from_bytes(value).expect("a header value");
        req = req.header(*name, value);
    }
    let resp = req.send().await.expect("the relay answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

/// FNV-1a, as the relay hashes bodies in `idempotency.jsonl`.
fn fnv1a(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A second relay started on a directory in use exits with an error naming
/// the lock, and leaves the first relay's `idempotency.jsonl` byte for byte
/// as it was; the first relay still answers its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_relay_on_the_journal_directory_leaves_the_first_keys_alone() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("second-relay");
    let a = relay(rx, &dir, "").await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let key = format!("order-{i}");
        let (status, body) = post_raw(a.addr, &[("idempotency-key", key.as_bytes())], "{}").await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["id"].as_str().unwrap_or_default().to_owned());
    }
    let file = dir.join("journal").join("idempotency.jsonl");
    let before = std::fs::read(&file).expect("the keys file");
    assert!(!before.is_empty(), "keys are on disk");

    let journal = dir.arg("journal");
    let dead_letters = dir.arg("dead-letter-b.jsonl");
    let (code, out, err) = run(
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--allow-destination-cidr",
            "127.0.0.0/8",
            "--downstream",
            &format!("http://{rx}/hooks"),
            "--journal-dir",
            &journal,
            "--dead-letter-file",
            &dead_letters,
        ],
        &[],
    )
    .await;
    eprintln!("second relay: exit {code}\n{out}\n{err}");
    assert_ne!(code, 0, "the second relay does not start");
    assert!(
        err.contains("in use by another process") || out.contains("in use by another process"),
        "it names the lock: {err}"
    );
    let after = std::fs::read(&file).expect("the keys file");
    assert_eq!(
        before.len(),
        after.len(),
        "the first relay's keys file is unchanged"
    );
    assert!(before == after, "byte for byte");
    for (i, id) in ids.iter().enumerate() {
        let key = format!("order-{i}");
        let (status, body) = post_raw(a.addr, &[("idempotency-key", key.as_bytes())], "{}").await;
        assert_eq!((status, body["id"].as_str()), (202, Some(id.as_str())));
    }
}

/// With a 1 s window, 3,000 keys of 200 bytes sent over about 6 s leave an
/// `idempotency.jsonl` within twice the live keys' lines (plus the 64 KiB
/// below which the file is never rewritten), far below what was written,
/// and the last key is still in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_file_stays_bounded_while_the_relay_runs() {
    const ROUNDS: usize = 30;
    const PER_ROUND: usize = 100;
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("keys-bounded");
    let relay = relay(rx, &dir, "--idempotency-window 1s").await;
    let client = http();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut last = (String::new(), String::new());
    let mut line_bytes = 0usize;
    for round in 0..ROUNDS {
        tick.tick().await;
        let mut tasks = Vec::new();
        for i in 0..PER_ROUND {
            let key = format!("{round:03}-{i:03}-{}", "k".repeat(192));
            let req = client
                .post(relay.url("/v1/webhooks/deliver"))
                .header("idempotency-key", key.clone())
                .body("{}");
            tasks.push(tokio::spawn(async move {
                let resp = req.send().await.ok()?;
                let status = resp.status().as_u16();
                let body: serde_json::Value =
                    serde_json::from_str(&resp.text().await.ok()?).ok()?;
                Some((key, status, body["id"].as_str()?.to_owned()))
            }));
        }
        for t in tasks {
            let (key, status, id) = t.await.ok().flatten().expect("an answer");
            assert_eq!(status, 202);
            line_bytes = line_bytes.max(key.len() + 100);
            last = (key, id);
        }
    }
    let file = dir.join("journal").join("idempotency.jsonl");
    let size = std::fs::metadata(&file).expect("the keys file").len() as usize;
    let written = ROUNDS * PER_ROUND * (last.0.len() + 40);
    // Live: at most the keys of the last second (5 rounds) and the round
    // being written.
    let live = 6 * PER_ROUND * line_bytes;
    eprintln!("keys file: {size} bytes; written at least {written}; live at most {live}");
    assert!(
        size <= 2 * live + 64 * 1024,
        "the keys file holds {size} bytes, over twice the live keys' {live} + 64 KiB"
    );
    // And it was compacted: a busy machine may leave the last rewrite
    // behind by a round or two, hence a quarter's margin.
    assert!(size < written * 3 / 4, "{size} of {written} bytes kept");
    // Nothing was appended since the last key: its line is still there.
    let text = std::fs::read_to_string(&file).expect("the keys file");
    assert!(text.contains(&last.0), "the last key ({}) is kept", last.1);
}

/// A keys file of 1,000,000 expired lines (about 100 MB) and 10 live ones
/// is read at start with a peak RSS under 64 MiB (the whole file read into
/// memory took more than the file), leaves a file of the live keys, and the
/// live keys still answer with their ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_keys_file_is_read_at_start_with_bounded_memory() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("keys-large");
    std::fs::create_dir_all(dir.join("journal")).unwrap();
    let file = dir.join("journal").join("idempotency.jsonl");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        for i in 0..1_000_000u64 {
            writeln!(
                out,
                "{{\"key\":\"expired-{i:010}-{}\",\"id\":{i},\"hash\":1,\"at_ms\":1000}}",
                "x".repeat(32)
            )
            .unwrap();
        }
        for i in 0..10u64 {
            writeln!(
                out,
                "{{\"key\":\"live-{i}\",\"id\":{},\"hash\":{},\"at_ms\":{now_ms}}}",
                i + 1,
                fnv1a(b"{}")
            )
            .unwrap();
        }
    }
    let written = std::fs::metadata(&file).unwrap().len();
    let relay = relay(rx, &dir, "").await;
    let peak_kib = std::fs::read_to_string(format!("/proc/{}/status", relay.pid()))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .expect("VmHWM");
    let kept = std::fs::metadata(&file).unwrap().len();
    eprintln!("keys file {written} bytes at start: peak RSS {peak_kib} KiB, {kept} bytes kept");
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB reading a {written}-byte keys file"
    );
    assert!(kept < 4096, "only the live keys are kept: {kept} bytes");
    for i in 0..10u64 {
        let key = format!("live-{i}");
        let (status, body) =
            post_raw(relay.addr, &[("idempotency-key", key.as_bytes())], "{}").await;
        let id = (i + 1).to_string();
        assert_eq!((status, body["id"].as_str()), (202, Some(id.as_str())));
    }
}

/// An empty, blank or unreadable key is a 400 with a problem body (never
/// ignored, never shared); the same key from two tenants is two webhooks,
/// each tenant's repeat answers its own id, and one tenant's body does not
/// conflict with another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_readable_and_scoped_by_tenant() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let dir = TempDir::new("keys-edges");
    let relay = relay(rx, &dir, "").await;
    let bad: [&[u8]; 5] = [b"", b"   ", "cl\u{e9}".as_bytes(), b"a\tb", b"\t"];
    for key in bad {
        let (status, body) = post_raw(relay.addr, &[("idempotency-key", key)], "{}").await;
        assert_eq!(status, 400, "key {key:?}: {body}");
        let kind = body["type"].as_str().unwrap_or_default();
        assert!(kind.starts_with("urn:dripfeed:problem:"), "{body}");
    }
    let key: &[u8] = b"shared-key";
    let as_a = [
        ("idempotency-key", key),
        ("x-tenant", b"tenant-a".as_slice()),
    ];
    let as_b = [
        ("idempotency-key", key),
        ("x-tenant", b"tenant-b".as_slice()),
    ];
    let (status, a1) = post_raw(relay.addr, &as_a, "{\"from\":\"a\"}").await;
    assert_eq!(status, 202, "{a1}");
    let (status, b1) = post_raw(relay.addr, &as_b, "{\"from\":\"b\"}").await;
    assert_eq!(status, 202, "another tenant's key is its own: {b1}");
    assert_eq!(b1["status"], "queued", "a new webhook: {b1}");
    assert_ne!(a1["id"], b1["id"], "two webhooks");
    let (status, a2) = post_raw(relay.addr, &as_a, "{\"from\":\"a\"}").await;
    assert_eq!((status, &a2["id"]), (202, &a1["id"]));
    let (status, b2) = post_raw(relay.addr, &as_b, "{\"from\":\"b\"}").await;
    assert_eq!((status, &b2["id"]), (202, &b1["id"]));
    let delivered = log
        .until(Duration::from_secs(20), |hits| hits.len() >= 2)
        .await;
    assert!(delivered, "both delivered");
    assert_eq!(log.len(), 2, "nothing else was delivered");
}
