//! A data directory that follows no planted link and stays owner-only.
//! A symbolic link planted where the relay keeps a file (the dead-letter
//! file, the journal's statuses, idempotency keys, state lock, lock or a
//! segment) is refused, naming the path, and the file it points at is left
//! as it was (before, webhook bodies were appended to it). A dead-letter
//! file others can read and a data directory anyone can write are made
//! owner-only with a warning naming them, or refused with
//! `--file-modes refuse` (before, left as they were, silently).

use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::{LOOPBACK, TempDir, bin, http};

/// How a start went.
enum Start {
    /// It exited: its code and what it printed on stderr.
    Refused(i32, String),
    /// It serves: the intake address, and stderr so far.
    Serving(
        std::net::SocketAddr,
        Arc<std::sync::Mutex<Vec<String>>>,
        Box<tokio::process::Child>,
    ),
}

/// Starts the relay with `extra` (after the loopback flags) and waits for
/// it to serve or to exit, at most a minute.
async fn start(extra: &str) -> Start {
    let mut args: Vec<String> = LOOPBACK.iter().map(|s| s.to_string()).collect();
    args.extend(extra.split_whitespace().map(str::to_owned));
    let mut child = tokio::process::Command::new(bin())
        .args(&args)
        .env_remove("RUST_LOG")
        .env_remove("DRIPFEED_RELAY_BIN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the relay starts");
    let err = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
    let kept = err.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = errors.next_line().await {
            kept.lock().unwrap().push(line);
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let served = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = out.next_line().await {
            if let Some(rest) = line.strip_prefix("webhook relay on http://") {
                return rest.split(": ").next().and_then(|a| a.parse().ok());
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    match served {
        Some(addr) => {
            tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
            Start::Serving(addr, err, Box::new(child))
        }
        None => {
            let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
                .await
                .expect("it exits")
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await; // stderr's last lines
            let text = err.lock().unwrap().join("\n");
            Start::Refused(status.code().unwrap_or(-1), text)
        }
    }
}

fn args(dir: &TempDir) -> String {
    format!(
        "--downstream http://127.0.0.1:9/h --retries 0 --data-dir {} --status-line=false",
        dir.arg("data")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_where_a_file_is_kept_is_refused_and_never_followed() {
    for planted in [
        "dead-letter.jsonl",
        "journal/statuses.jsonl",
        "journal/idempotency.jsonl",
        "journal/registry.kv",
        "journal/LOCK",
        "journal/0000000000000001.seg",
    ] {
        let dir = TempDir::new("planted");
        std::fs::create_dir_all(dir.join("data/journal")).unwrap();
        let sentinel = dir.join("sentinel");
        std::fs::write(&sentinel, "keep me\n").unwrap();
        let at = dir.join(&format!("data/{planted}"));
        symlink(&sentinel, &at).unwrap();
        match start(&args(&dir)).await {
            Start::Refused(code, err) => {
                assert_ne!(code, 0, "{planted}");
                assert!(
                    err.contains(&*at.to_string_lossy()) && err.contains("symbolic link"),
                    "{planted}: {err}"
                );
            }
            Start::Serving(addr, err, mut child) => {
                // Whatever it started without, it writes nothing through the link.
                for n in 0..5 {
                    let _ = http()
                        .post(format!("http://{addr}/v1/webhooks/deliver"))
                        .header("content-type", "application/json")
                        .header("idempotency-key", format!("k{n}"))
                        .body(format!("{{\"n\":{n}}}"))
                        .send()
                        .await;
                }
                tokio::time::sleep(Duration::from_secs(2)).await; // retries 0: dead-lettered
                let _ = child.start_kill();
                let _ = child.wait().await;
                let err = err.lock().unwrap().join("\n");
                assert!(
                    err.contains("symbolic link"),
                    "{planted}: it says so: {err}"
                );
            }
        }
        assert_eq!(
            std::fs::read_to_string(&sentinel).unwrap(),
            "keep me\n",
            "{planted}: the file the link points at is as it was"
        );
        assert!(
            std::fs::symlink_metadata(&at)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{planted}"
        );
    }
}

/// A link planted where the journal's directory is made (in the data
/// directory) is refused at start, and nothing is written or chmod'ed
/// where it points (before, the journal, the registry with its secrets and
/// the keys went into the link's target, made 0700). A data directory
/// given as a link is the operator's and followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_where_the_journal_directory_is_made_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("planted-dir");
    let target = dir.join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    symlink(&target, dir.join("data/journal")).unwrap();
    match start(&args(&dir)).await {
        Start::Refused(code, err) => {
            assert_eq!(code, 2, "{err}");
            assert!(err.contains("symbolic link"), "{err}");
        }
        Start::Serving(_, err, mut child) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            panic!("started through the link: {:?}", err.lock().unwrap());
        }
    }
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing written there"
    );
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "its mode left as it was");

    // The data directory itself given as a link: followed.
    let real = dir.join("real");
    std::fs::create_dir_all(&real).unwrap();
    symlink(&real, dir.join("linked")).unwrap();
    let given = format!(
        "--downstream http://127.0.0.1:9/h --retries 0 --data-dir {} --status-line=false",
        dir.arg("linked")
    );
    match start(&given).await {
        Start::Serving(_, _, mut child) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        Start::Refused(code, err) => panic!("{code}: {err}"),
    }
    assert!(
        real.join("journal").is_dir(),
        "the journal is in the link's directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_others_could_use_are_fixed_or_refused() {
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let plant = |dir: &TempDir| {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        let letters = data.join("dead-letter.jsonl");
        std::fs::write(&letters, "").unwrap();
        std::fs::set_permissions(&letters, std::fs::Permissions::from_mode(0o644)).unwrap();
        (data, letters)
    };
    // Refused: the start fails, naming the directory, and changes nothing.
    let dir = TempDir::new("modes-refuse");
    let (data, letters) = plant(&dir);
    match start(&format!("{} --file-modes refuse", args(&dir))).await {
        Start::Refused(code, err) => {
            assert_ne!(code, 0);
            assert!(
                err.contains(&*data.to_string_lossy()) && err.contains("0777"),
                "{err}"
            );
        }
        Start::Serving(..) => panic!("a 0777 data directory was taken with --file-modes refuse"),
    }
    assert_eq!(
        (mode(&data), mode(&letters)),
        (0o777, 0o644),
        "refused, not changed"
    );

    // Fixed (the default), each with a warning naming it.
    let dir = TempDir::new("modes-fix");
    let (data, letters) = plant(&dir);
    let Start::Serving(_, err, mut child) = start(&args(&dir)).await else {
        panic!("the default fixes the modes and starts");
    };
    assert_eq!((mode(&data), mode(&letters)), (0o700, 0o600));
    let err = err.lock().unwrap().join("\n");
    for path in [&data, &letters] {
        assert!(
            err.lines()
                .any(|l| l.contains("made owner-only") && l.contains(&*path.to_string_lossy())),
            "{}: {err}",
            path.display()
        );
    }
    let _ = child.start_kill();
}
