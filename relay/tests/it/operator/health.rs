//! `dripfeed-relay health`, the container's `HEALTHCHECK`: against a relay
//! serving with the same settings it exits 0; against an address where
//! nothing listens, 1, saying what it asked. `completions` and `man` print
//! what a shell and `man` read.

use crate::harness::{Relay, TempDir, argv, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_asks_the_relay_its_configuration_describes() {
    let cwd = TempDir::new("health");
    let relay = Relay::start_in(&cwd.0, &argv("--downstream http://127.0.0.1:9/hooks"), &[]).await;
    let admin = relay.admin.expect("an admin listener").to_string();
    let (code, out, err) = run(&["health", "--admin-listen", &admin], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("/readyz"), "{out}");

    // Every address: asked on loopback.
    let port = relay.admin.expect("admin").port().to_string();
    let every = format!("0.0.0.0:{port}");
    let (code, _, err) = run(
        &[
            "health",
            "--admin-listen",
            &every,
            "--allow-unauthenticated",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    drop(relay);

    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let (code, _, err) = run(&["health", "--admin-listen", &free], &[]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&free), "names what it asked: {err}");
}

#[tokio::test]
async fn completions_and_the_manual_page_print() {
    let (code, out, err) = run(&["completions", "bash"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("complete") && out.contains("dripfeed-relay"),
        "{out}"
    );
    let (code, _, err) = run(&["completions", "tcsh"], &[]).await;
    assert_eq!(code, 2, "an unknown shell is refused: {err}");
    let (code, out, err) = run(&["man"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(".ie") || out.contains(".TH"),
        "roff: {}",
        &out[..out.len().min(200)]
    );
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dripfeed-relay.1"))
        .expect("relay/dripfeed-relay.1");
    assert_eq!(out, page, "the checked-in page is what man prints");
}
