//! Stopping within the grace. With receivers that hang, SIGTERM ends the
//! relay within `shutdown_grace` and a second (before, the drain waited
//! for every delivery in flight, up to `deliver_timeout`: 19.6 s for a 3 s
//! grace), and the webhooks whose deliveries were stopped are kept in the
//! journal and delivered at the next start. A SIGHUP that comes the
//! moment the relay's runtime exists reloads nothing yet and ends nothing
//! (before, the handler came later and the default action ended it). A
//! stdout nobody reads any more (a closed pipe) does not end a stop in a
//! panic: its lines are dropped (before, the first line of the stop
//! panicked, exit 101, before the drains had finished).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{LOOPBACK, Relay, TempDir, bin, eventually};
use crate::receivers::{self, Log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_within_its_grace_and_keeps_what_was_in_flight() {
    let hung = Arc::new(Log::default());
    // Records each request as it comes and answers after a minute: every
    // delivery hangs past the grace.
    let app = {
        let hung = hung.clone();
        axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let hung = hung.clone();
                async move {
                    hung.record(&uri, &headers, body);
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    axum::http::StatusCode::NO_CONTENT
                }
            },
        )
    };
    let rx = receivers::serve(app).await;
    let dir = TempDir::new("stop-grace");
    let args = |url: &str| {
        format!(
            "--downstream {url} --journal-dir {} --dead-letter-file {} --shutdown-grace 3s \
             --deliver-timeout 30s --drain-rate 50",
            dir.arg("journal"),
            dir.arg("dl.jsonl")
        )
    };
    let mut relay = Relay::start(&args(&format!("http://{rx}/h"))).await;
    let mut ids = Vec::new();
    for n in 0..10 {
        let (status, id) = relay.post_for("default", n).await;
        assert_eq!(status, 202);
        ids.extend(id);
    }
    let out = eventually(Duration::from_secs(20), || async { hung.len() >= 10 }).await;
    assert!(out, "all ten are in flight: {}", hung.len());
    let began = Instant::now();
    relay.signal("TERM");
    let status = relay.exit(Duration::from_secs(15)).await;
    let took = began.elapsed();
    assert!(status.success(), "{status:?}");
    eprintln!("a 3 s grace with ten deliveries hanging: exited after {took:?}");
    assert!(
        took < Duration::from_secs(6),
        "within the grace and a second (and slack): {took:?}"
    );

    // The next start delivers every one of them, under its id.
    let log = Arc::new(Log::default());
    let good = receivers::ok(log.clone(), Duration::ZERO).await;
    let _again = Relay::start(&args(&format!("http://{good}/h"))).await;
    let all = log
        .until(Duration::from_secs(20), |hits| {
            ids.iter().all(|id| hits.iter().any(|h| &h.key == id))
        })
        .await;
    assert!(
        all,
        "{} of {} delivered after the restart",
        log.len(),
        ids.len()
    );
}

/// The relay's thread count, from /proc.
fn threads(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_the_moment_the_runtime_exists_ends_nothing() {
    let dir = TempDir::new("stop-hup");
    let mut died = 0;
    for round in 0..20 {
        let mut child = spawn(
            &format!(
                "--no-journal --dead-letter-file {}",
                dir.arg(&format!("dl-{round}.jsonl"))
            ),
            Stdio::null(),
        );
        let pid = child.id().expect("a pid");
        // The moment its runtime's threads exist (busy: a poll is µs).
        let sent = tokio::task::spawn_blocking(move || {
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                match threads(pid) {
                    Some(n) if n > 1 => {
                        let pid = rustix::process::Pid::from_raw(pid as i32);
                        return pid.is_some_and(|pid| {
                            rustix::process::kill_process(pid, rustix::process::Signal::HUP).is_ok()
                        });
                    }
                    Some(_) => std::hint::spin_loop(),
                    None => return false,
                }
            }
            false
        })
        .await
        .unwrap();
        assert!(sent, "round {round}: a SIGHUP was sent");
        let alive = !eventually(Duration::from_millis(500), || {
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            async move { exited }
        })
        .await;
        if !alive {
            died += 1;
            continue;
        }
        let status = stop(&mut child, Duration::from_secs(20)).await;
        assert!(status.success(), "round {round}: {status:?}");
    }
    assert_eq!(died, 0, "relays ended by an early SIGHUP, of 20");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_with_its_stdout_closed_ends_cleanly() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = TempDir::new("stop-stdout");
    let mut child = spawn(
        &format!(
            "--journal-dir {} --dead-letter-file {}",
            dir.arg("journal"),
            dir.arg("dl.jsonl")
        ),
        Stdio::piped(),
    );
    let out = child.stdout.take().expect("its stdout");
    let mut lines = tokio::io::BufReader::new(out).lines();
    let listening = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("webhook relay on http://") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(listening, "the relay listens");
    drop(lines); // nobody reads its stdout any more
    let status = stop(&mut child, Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}");
}

/// The relay on loopback delivering to a closed port, with `extra` flags
/// and its stdout to `stdout` (stderr unread), not through the harness:
/// the tests signal it at moments of their own choosing.
fn spawn(extra: &str, stdout: Stdio) -> tokio::process::Child {
    let mut args: Vec<String> = LOOPBACK.iter().map(|s| s.to_string()).collect();
    args.extend(
        format!("--downstream http://127.0.0.1:9/h --status-line=false {extra}")
            .split_whitespace()
            .map(str::to_owned),
    );
    tokio::process::Command::new(bin())
        .args(&args)
        .env_remove("RUST_LOG")
        .env_remove("DRIPFEED_RELAY_BIN")
        .stdout(stdout)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the relay starts")
}

/// SIGTERM, then its exit (within `limit`).
async fn stop(child: &mut tokio::process::Child, limit: Duration) -> std::process::ExitStatus {
    let pid = rustix::process::Pid::from_raw(child.id().expect("a pid") as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    tokio::time::timeout(limit, child.wait())
        .await
        .expect("it stops")
        .unwrap()
}
