//! One configuration, three sources: the same settings given as flags, as
//! `DRIPFEED_*` variables and as a TOML file make the same relay (what
//! `print-config` says, the lines it starts with, the gauges it publishes);
//! a bad file, variable or flag is refused with exit code 2 and a message
//! naming the key (and file:line); the example file passes `check-config`;
//! without a destination the relay says how to give one.

use std::time::Duration;

use crate::harness::{LOOPBACK, Relay, TempDir, eventually, owned, run};
use crate::receivers;

/// `print-config` without the sources: the values alone.
fn values(printed: &str) -> String {
    printed
        .lines()
        .map(|l| l.split("  #").next().unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The startup lines, the address taken out.
async fn startup(relay: &Relay) -> Vec<String> {
    let serving = relay
        .out
        .find(Duration::from_secs(5), |l| l.starts_with("try:"))
        .await;
    assert!(serving.is_some(), "the relay says how to try it");
    let addr = relay.addr.to_string();
    let admin = relay.admin.map(|a| a.to_string()).unwrap_or_default();
    relay
        .out
        .all()
        .iter()
        .take_while(|l| !l.starts_with("try:"))
        .map(|l| l.replace(&addr, "ADDR").replace(&admin, "ADMIN"))
        .collect()
}

/// What the relay publishes once its destination is active: rate, capacity
/// and in-flight cap gauges for `destination="default"`.
async fn published(relay: &Relay) -> (f64, f64) {
    // The receiver never answers: the destination stays active.
    assert_eq!(relay.post(&[], "{}").await.0, 202);
    let labels = [("throttle", "webhook_relay"), ("destination", "default")];
    let ok = eventually(Duration::from_secs(10), || async {
        relay
            .metrics()
            .await
            .get("leaky_bucket_drain_rate", &labels)
            > 0.0
    })
    .await;
    assert!(ok, "the destination's gauges are published");
    let m = relay.metrics().await;
    (
        m.get("leaky_bucket_drain_rate", &labels),
        m.get("leaky_bucket_queue_capacity", &labels),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_settings_as_flags_variables_or_a_file_make_the_same_relay() {
    let rx = receivers::dead().await;
    let dir = TempDir::new("three-ways");
    let url = format!("http://{rx}/hooks");
    let dl = dir.arg("dl.jsonl");
    // (flag, variable value, TOML value)
    let settings: [(&str, &str, String); 8] = [
        ("drain-rate", "37", "37".into()),
        ("latency-budget", "3s", "\"3s\"".into()),
        ("max-in-flight", "5", "5".into()),
        ("overflow", "head-drop", "\"head-drop\"".into()),
        ("retries", "2", "2".into()),
        ("tenant-header", "X-Org", "\"X-Org\"".into()),
        ("downstream", &url, format!("\"{url}\"")),
        ("dead-letter-file", &dl, format!("{dl:?}")),
    ];
    let key = |flag: &str| flag.replace('-', "_");
    let var = |flag: &str| format!("DRIPFEED_{}", key(flag).to_ascii_uppercase());
    let flags: Vec<String> = settings
        .iter()
        .flat_map(|(f, v, _)| [format!("--{f}"), v.to_string()])
        .chain(owned(&["--no-journal"]))
        .collect();
    let vars: Vec<(String, String)> = settings
        .iter()
        .map(|(f, v, _)| (var(f), v.to_string()))
        .chain([("DRIPFEED_NO_JOURNAL".to_owned(), "true".to_owned())])
        .collect();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let file = dir.join("relay.toml");
    let toml: String = settings
        .iter()
        .map(|(f, _, t)| format!("{} = {t}\n", key(f)))
        .chain(["no_journal = true\n".to_owned()])
        .collect();
    std::fs::write(&file, toml).unwrap();
    let file = file.to_string_lossy().into_owned();
    let listen = owned(LOOPBACK);
    let as_flags: Vec<String> = listen
        .iter()
        .cloned()
        .chain(flags.iter().cloned())
        .collect();
    let as_file: Vec<String> = listen
        .iter()
        .cloned()
        .chain(owned(&["--config", &file]))
        .collect();

    let mut printed = Vec::new();
    let mut running = Vec::new();
    for (args, env) in [
        (&as_flags, &[][..]),
        (&listen, &vars[..]),
        (&as_file, &[][..]),
    ] {
        let mut print = vec!["print-config".to_owned()];
        print.extend(args.iter().cloned());
        let print: Vec<&str> = print.iter().map(String::as_str).collect();
        let (code, out, err) = run(&print, env).await;
        assert_eq!(code, 0, "{err}");
        printed.push(out);
        let relay = Relay::spawn(args, env).await;
        let shown = published(&relay).await;
        running.push((startup(&relay).await, shown));
    }
    assert_eq!(
        values(&printed[0]),
        values(&printed[1]),
        "flags and variables"
    );
    assert_eq!(
        values(&printed[0]),
        values(&printed[2]),
        "flags and the file"
    );
    assert!(
        printed[0].contains("drain_rate = 37  # flag --drain-rate"),
        "{}",
        printed[0]
    );
    assert!(
        printed[1].contains("drain_rate = 37  # environment DRIPFEED_DRAIN_RATE"),
        "{}",
        printed[1]
    );
    assert!(
        printed[2].contains("drain_rate = 37  # file "),
        "{}",
        printed[2]
    );
    assert!(
        printed[0].contains("fleet_size = 1  # default"),
        "{}",
        printed[0]
    );
    assert_eq!(
        running[0], running[1],
        "flags and variables run the same relay"
    );
    assert_eq!(
        running[0], running[2],
        "flags and the file run the same relay"
    );
    let (lines, (rate, capacity)) = &running[0];
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("at 37/s, capacity 111 (3s budget), overflow head-drop")),
        "{lines:?}"
    );
    assert_eq!((*rate, *capacity), (37.0, 111.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_variables_and_flags_are_refused_with_exit_2() {
    let dir = TempDir::new("refused");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:0\"\ndrain_rate = \"fast\"\nlatency_budget = \"2 fortnights\"\nmax_inflight = 8\n\n\
         [[destinations]]\nname = \"a\"\nurl = \"ftp://x\"\n",
    )
    .unwrap();
    let path = file.to_string_lossy().into_owned();
    let (code, _, err) = run(&["check-config", &path], &[]).await;
    assert_eq!(code, 2, "{err}");
    for want in [
        format!("{path}:2: drain_rate: expected a number, found string"),
        format!("{path}:3: latency_budget: expected a duration"),
        format!(
            "{path}:4: max_inflight: unknown key \"max_inflight\" (did you mean max_in_flight?)"
        ),
        format!("{path}:6: destinations[0].url: \"ftp://x\" is not http:// or https://"),
    ] {
        assert!(err.contains(&want), "{want:?} not in:\n{err}");
    }
    // Starting with it is refused the same way, before any port is taken.
    let (code, out, err) = run(
        &["--config", &path, "--downstream", "http://127.0.0.1:9/"],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(!out.contains("webhook relay on"), "{out}");
    assert!(err.contains(":2: drain_rate"), "{err}");

    let (code, _, err) = run(
        &["--downstream", "http://127.0.0.1:9/"],
        &[("DRIPFEED_DRAIN_RAET", "5")],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "environment DRIPFEED_DRAIN_RAET: unknown variable (did you mean DRIPFEED_DRAIN_RATE?)"
        ),
        "{err}"
    );
    let (code, _, err) = run(
        &["--downstream", "http://127.0.0.1:9/"],
        &[("DRIPFEED_RETRIES", "-1")],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("environment DRIPFEED_RETRIES: retries: expected a whole number"),
        "{err}"
    );
    let (code, _, err) = run(
        &["--downstream", "http://127.0.0.1:9/"],
        &[("DRIPFEED_DEMO", "true")],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--demo is a command-line action"), "{err}");
    let (code, _, err) = run(
        &["--downstream", "http://127.0.0.1:9/", "--drain-rate", "0"],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--drain-rate: must be a number above 0"),
        "{err}"
    );
    let (code, _, err) = run(
        &["--downstream", "http://127.0.0.1:9/", "--drain-rate", "x"],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--drain-rate"), "{err}");
    let (code, _, err) = run(
        &[
            "--downstream",
            "http://127.0.0.1:9/",
            "--ca-file",
            "/nonexistent.pem",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--ca-file: /nonexistent.pem"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_file_passes_check_config() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/relay.example.toml");
    let (code, out, err) = run(&["check-config", example], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("configuration ok"), "{out}");
    // The file may be given as --config too (as the relay itself takes
    // it), the same file both ways, but not two.
    let (code, out, err) = run(&["check-config", "--config", example], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run(&["check-config", "--config", example, "/dev/null"], &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not both"), "{err}");
    // No file: the variables and flags alone are checked.
    let (code, _, err) = run(&["check-config", "--drain-rate=0"], &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--drain-rate"), "{err}");
    let (code, out, err) = run(
        &[
            "check-config",
            "--destination",
            "a=https://receiver.example/a",
        ],
        &[("DRIPFEED_DRAIN_RATE", "20")],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 destination"), "{out}");
    // With a destination from the environment, nothing is missing.
    let (code, out, _) = run(
        &["check-config", example],
        &[("DRIPFEED_DOWNSTREAM", "https://receiver.example/hooks")],
    )
    .await;
    assert_eq!(code, 0);
    assert!(!out.contains("note:"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_destination_the_relay_refuses_to_start_and_says_how() {
    let (code, out, err) = run(&["--listen", "127.0.0.1:0"], &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    for how in [
        "--downstream URL",
        "--destination NAME=URL",
        "[[destinations]] in --config",
        "--demo",
        "--data-dir DIR to make applications",
    ] {
        assert!(err.contains(how), "{how:?} not in {err}");
    }
    // The demos bring their own receivers, never beside a real destination.
    let (code, _, err) = run(
        &["--demo-fanout", "--downstream", "http://127.0.0.1:9/"],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--demo-fanout brings its own receivers"),
        "{err}"
    );
    let two = [
        "--demo",
        "--destination",
        "a=http://127.0.0.1:9/",
        "--destination",
        "b=http://127.0.0.1:9/",
    ];
    let (code, _, err) = run(&two, &[]).await;
    assert_eq!(code, 2, "{err}");
}
