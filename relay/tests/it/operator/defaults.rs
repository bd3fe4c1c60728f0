//! A service's defaults: one data directory (`--data-dir`, else
//! `$STATE_DIRECTORY`, else `./dripfeed-data`) holding the journal and the
//! dead letters, printed as absolute paths; an upgraded relay that finds
//! the old default paths holding data keeps them, or refuses naming both;
//! and the per-second status line only on a terminal or with
//! `--status-line`.

use std::sync::Arc;
use std::time::Duration;

use super::mode;
use crate::harness::{Relay, TempDir, argv, run_in};
use crate::receivers::{self, Log};

/// The `files: …` line the relay prints at start.
async fn files_line(relay: &Relay) -> String {
    relay
        .out
        .find(Duration::from_secs(10), |l| l.starts_with("files: "))
        .await
        .unwrap_or_else(|| panic!("no files line: {:?}", relay.out.all()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_live_in_one_data_directory_named_in_full() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let cwd = TempDir::new("data-dir");
    let args = argv(&format!("--destination a=http://{rx}/a"));
    let relay = Relay::start_in(&cwd.0, &args, &[]).await;
    let data = cwd.join("dripfeed-data");
    let line = files_line(&relay).await;
    assert!(
        line.contains(&format!("journal {}", data.join("journal").display()))
            && line.contains(&format!(
                "dead letters {}",
                data.join("dead-letter.jsonl").display()
            ))
            && line.contains(&format!(
                "registry {}",
                data.join("journal/registry.kv").display()
            )),
        "{line}"
    );
    assert_eq!(relay.post_for("a", 1).await.0, 202);
    assert!(log.until(Duration::from_secs(20), |h| h.len() == 1).await);
    assert_eq!(mode(&data), 0o700, "the data directory is owner-only");
    assert!(data.join("journal").is_dir() && data.join("dead-letter.jsonl").is_file());
    for old in ["relay-journal", "dead-letter.jsonl"] {
        assert!(!cwd.join(old).exists(), "{old} in the working directory");
    }
    drop(relay);

    // Under systemd (StateDirectory=), $STATE_DIRECTORY is the default.
    let state = TempDir::new("state-directory");
    let env = [("STATE_DIRECTORY", state.0.to_str().unwrap())];
    let relay = Relay::start_in(&cwd.0, &args, &env).await;
    let line = files_line(&relay).await;
    assert!(
        line.contains(&format!("journal {}", state.join("journal").display())),
        "{line}"
    );
    // A relative --data-dir is printed absolute.
    drop(relay);
    let mut given = args.clone();
    given.extend(argv("--data-dir var/relay"));
    let relay = Relay::start_in(&cwd.0, &given, &env).await;
    let line = files_line(&relay).await;
    assert!(
        line.contains(&format!(
            "journal {}",
            cwd.join("var/relay/journal").display()
        )),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_relay_keeps_the_old_paths_or_refuses_naming_both() {
    let cwd = TempDir::new("upgrade");
    // A relay of before: the journal in ./relay-journal, holding a webhook
    // whose receiver was down when the relay was killed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut old = Relay::start_in(
        &cwd.0,
        &argv(&format!(
            "--destination a=http://{closed}/a --journal-dir relay-journal \
             --dead-letter-file dead-letter.jsonl --retry-min 10s"
        )),
        &[],
    )
    .await;
    assert_eq!(old.post_for("a", 7).await.0, 202);
    old.kill().await;

    // Upgraded, started with the same command line minus the paths: it
    // keeps the old journal (and says how to move) and delivers what it
    // held.
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let args = argv(&format!("--destination a=http://{rx}/a"));
    let relay = Relay::start_in(&cwd.0, &args, &[]).await;
    let line = files_line(&relay).await;
    assert!(
        line.contains(&format!("journal {}", cwd.join("relay-journal").display()))
            && line.contains(&format!(
                "dead letters {}",
                cwd.join("dead-letter.jsonl").display()
            )),
        "{line}"
    );
    assert!(
        log.until(Duration::from_secs(20), |h| h.len() == 1).await,
        "the webhook the old journal held is delivered"
    );
    assert_eq!(log.hits()[0].body.as_ref(), b"{\"n\":7}");
    let warned = relay
        .err
        .find(Duration::from_secs(5), |l| {
            l.contains("from before --data-dir")
        })
        .await;
    assert!(warned.is_some(), "{:?}", relay.err.all());
    drop(relay);

    // Data in both places: refused, naming both.
    let new_journal = cwd.join("dripfeed-data/journal");
    std::fs::create_dir_all(&new_journal).unwrap();
    std::fs::write(new_journal.join("statuses.jsonl"), "{}\n").unwrap();
    let rx_arg = format!("a=http://{rx}/a");
    let (code, _, err) = run_in(&cwd.0, &["--destination", &rx_arg], &[]).await;
    assert_eq!(code, 2, "{err}");
    let old_journal = cwd.join("relay-journal");
    assert!(
        err.contains(&old_journal.display().to_string())
            && err.contains(&new_journal.display().to_string()),
        "{err}"
    );
    // Saying which one starts it.
    let relay = Relay::start_in(
        &cwd.0,
        &argv(&format!("{} --data-dir dripfeed-data", args.join(" "))),
        &[],
    )
    .await;
    let line = files_line(&relay).await;
    assert!(line.contains(&new_journal.display().to_string()), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_line_is_for_a_terminal_or_the_flag() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let dir = TempDir::new("status-line");
    let start = |name: &str, more: &str| {
        let args = argv(&format!(
            "--destination a=http://{rx}/a --no-journal --dead-letter-file {} {more}",
            dir.arg(name)
        ));
        async move { Relay::start_with(&args, &[]).await }
    };
    let quiet = start("q.jsonl", "").await;
    let loud = start("l.jsonl", "--status-line").await;
    assert_eq!(quiet.post_for("a", 1).await.0, 202);
    assert_eq!(loud.post_for("a", 2).await.0, 202);
    let status = |l: &String| l.starts_with("depth ") || l.contains("\u{1b}[2K");
    // Three lines from the flagged relay: the quiet one, started first,
    // has run as long and printed none (its stdout is a pipe).
    let three = crate::harness::eventually(Duration::from_secs(20), || async {
        loud.out.all().iter().filter(|l| status(l)).count() >= 3
    })
    .await;
    assert!(three, "{:?}", loud.out.all());
    let printed: Vec<String> = quiet.out.all().into_iter().filter(status).collect();
    assert!(printed.is_empty(), "{printed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_systemd_the_working_directory_is_the_data_directory() {
    // WorkingDirectory=%S/NAME with StateDirectory=NAME: ./dead-letter.jsonl
    // is the data directory's own, not an old layout's (before this was
    // seen, a unit whose relay had written one dead letter refused to
    // start again).
    let state = TempDir::new("systemd-cwd");
    std::fs::write(state.join("dead-letter.jsonl"), "{}\n").unwrap();
    std::fs::create_dir_all(state.join("journal")).unwrap();
    let env = [("STATE_DIRECTORY", state.0.to_str().unwrap())];
    let rx = receivers::dead().await;
    let args = argv(&format!("--destination a=http://{rx}/a"));
    let relay = Relay::start_in(&state.0, &args, &env).await;
    let line = files_line(&relay).await;
    assert!(
        line.contains(&format!(
            "dead letters {}",
            state.join("dead-letter.jsonl").display()
        )),
        "{line}"
    );
}
