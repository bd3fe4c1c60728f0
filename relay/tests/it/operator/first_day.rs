//! What a first day leaves behind: a start refused for its configuration
//! creates nothing where it ran (no `./dripfeed-data`, no journal), and
//! `--demo` run from a checkout leaves no dead-letter file there (its
//! files live beside its journal, under the system's temporary
//! directory).

use crate::harness::{TempDir, run_in};

/// The names in `dir`.
fn entries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_refused_start_creates_nothing() {
    let cwd = TempDir::new("first-day-refused");
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--downstream",
        "http://127.0.0.1:9/hooks",
        "--tls-cert",
        "missing.pem",
        "--tls-key",
        "missing.key",
    ];
    let (code, out, err) = run_in(&cwd.0, &args, &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--tls-cert"), "{err}");
    assert_eq!(entries(&cwd.0), Vec::<String>::new(), "nothing made: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_leaves_nothing_where_it_ran() {
    let cwd = TempDir::new("first-day-demo");
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--demo",
    ];
    let (code, out, err) = run_in(&cwd.0, &args, &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let temp = std::env::temp_dir().display().to_string();
    assert!(out.contains(&format!("dead letters {temp}")), "{out}");
    assert_eq!(entries(&cwd.0), Vec::<String>::new(), "{out}");
}
