//! The book's quick start, run as pasted: the two shell blocks of "In
//! front of your own receiver" (docs/src/quick-start.md) are read from the
//! page and run by bash in one shell, with the relay this package built on
//! `PATH`. Only what a terminal does by itself is added: the `cargo
//! install` line is left out (the relay is built already), the relay runs
//! in the background instead of holding the terminal, and the shell waits
//! for it to be ready before the second block. Then the webhook the block
//! posted must be delivered (its status says so) and the example receiver
//! must have printed it as valid, so the page cannot drift from the binary.
//!
//! Real time, bounded (a minute at most); it uses the page's fixed ports
//! (8080, 8090, 9000), which the other tests never take (they listen on
//! port 0).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The shell blocks of `page` (between "```sh" and "```") in the section
/// under the heading `heading`, up to the next heading.
fn blocks(page: &str, heading: &str) -> Vec<String> {
    let Some(start) = page.find(heading) else {
        panic!("no heading {heading:?} on the page");
    };
    let section = &page[start + heading.len()..];
    let end = ["\n## ", "\n### "]
        .iter()
        .filter_map(|h| section.find(h))
        .min()
        .unwrap_or(section.len());
    let mut rest = &section[..end];
    let mut out = Vec::new();
    while let Some(open) = rest.find("```sh\n") {
        let body = &rest[open + 6..];
        let Some(close) = body.find("```") else { break };
        out.push(body[..close].to_owned());
        rest = &body[close + 3..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_runs_as_pasted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository");
    let page =
        std::fs::read_to_string(root.join("docs/src/quick-start.md")).expect("the quick start");
    let found = blocks(&page, "### In front of your own receiver");
    assert!(
        found.len() >= 2,
        "two shell blocks under the heading: {found:?}"
    );
    let (start, follow) = (&found[0], &found[1]);
    // The first block as pasted, but for installing (done) and the relay
    // holding the terminal (backgrounded, its output kept).
    let mut first = String::new();
    for line in start.lines() {
        if line.trim_start().starts_with("cargo install") {
            continue;
        }
        if line.trim_start().starts_with("dripfeed-relay ") {
            first.push_str(&format!("{line} > relay.out 2>&1 &\n"));
        } else {
            first.push_str(line);
            first.push('\n');
        }
    }
    assert!(first.contains("dripfeed-relay --config"), "{start}");
    let bin = Path::new(env!("CARGO_BIN_EXE_dripfeed-relay"));
    let script = format!(
        "set -euo pipefail\n\
         trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT\n\
         export PATH=\"{bin_dir}:$PATH\"\n\
         cd \"{root}\"\n\
         {first}\
         for _ in $(seq 200); do curl -sf http://127.0.0.1:8090/readyz >/dev/null && break; sleep 0.1; done\n\
         {follow}\n\
         for _ in $(seq 100); do curl -s http://127.0.0.1:8090/v1/webhooks/$ID | grep -q '\"delivered\"' && break; sleep 0.1; done\n\
         echo\n\
         echo \"final: $(curl -s http://127.0.0.1:8090/v1/webhooks/$ID)\"\n\
         sleep 0.5\n",
        bin_dir = bin.parent().expect("a directory").display(),
        root = root.display(),
    );
    let run = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the walkthrough within a minute")
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{stdout}\n{stderr}\n--- script:\n{script}"
    );
    assert!(
        stdout.contains("\"status\":\"queued\""),
        "the first answer: {stdout}"
    );
    let last = stdout
        .lines()
        .find(|l| l.starts_with("final: "))
        .unwrap_or_default();
    assert!(
        last.contains("\"state\":\"delivered\""),
        "{stdout}\n{stderr}"
    );
    let id = last
        .split("\"id\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default();
    assert!(
        stdout.contains(&format!("valid {id} {{\"order\":1}}")),
        "the example receiver printed it as valid: {stdout}"
    );
}
