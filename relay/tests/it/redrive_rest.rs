//! A redrive bigger than the queue can take leaves a record of what it
//! could not re-admit: every such line (refused by a full queue, naming a
//! destination no longer configured, or unreadable) goes to `FILE.rest`
//! verbatim, the relay prints how many, and redriving `FILE.rest` later
//! re-admits the rest. Each line goes through the destination it names.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, run};
use crate::receivers::{self, Log};

/// Readable lines, half for each destination.
const LINES: u64 = 600;
/// Lines that can never be re-admitted.
const UNREADABLE: [&str; 3] = ["not json", "{\"id\":", "[1,2,3]"];
const GONE: u64 = 2;

/// The line of webhook `id` for `destination`, as the relay writes it.
fn line(id: u64, destination: &str) -> String {
    format!(
        "{{\"reason\":\"failed\",\"id\":\"{id}\",\"destination\":\"{destination}\",\"attempts\":1,\
         \"last_status\":410,\"tenant\":null,\"content_type\":\"application/json\",\
         \"received_unix_ms\":1,\"body\":\"{{\\\"n\\\":{id}}}\"}}"
    )
}

/// The line printed by the redrive, and the numbers in it:
/// (re-admitted, refused, unreadable, kept in .rest).
async fn redriven(relay: &Relay) -> (String, Vec<u64>) {
    let l = relay
        .out
        .find(Duration::from_secs(60), |l| l.starts_with("redrive "))
        .await
        .expect("the redrive's line");
    let numbers = l
        .split([' ', ','])
        .filter_map(|w| w.parse::<u64>().ok())
        .collect();
    (l, numbers)
}

fn count_lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_keeps_what_it_refused_in_a_rest_file_and_the_rest_redrives_later() {
    let (log_a, log_b) = (Arc::new(Log::default()), Arc::new(Log::default()));
    let a = receivers::ok(log_a.clone(), Duration::ZERO).await;
    let b = receivers::ok(log_b.clone(), Duration::ZERO).await;
    let dir = TempDir::new("redrive-rest");
    let file = dir.join("letters.jsonl");
    let rest = dir.join("letters.jsonl.rest");
    let mut text = String::new();
    for id in 1..=LINES {
        text.push_str(&line(id, if id % 2 == 1 { "a" } else { "b" }));
        text.push('\n');
    }
    for id in 0..GONE {
        text.push_str(&line(1_000_000 + id, "gone"));
        text.push('\n');
    }
    for l in UNREADABLE {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .expect("the dead-letter file to redrive");
    let total = LINES as usize + GONE as usize + UNREADABLE.len();
    let destinations = format!("--destination a=http://{a}/hooks --destination b=http://{b}/hooks");

    // Each destination holds 10 at 10/s: most lines are refused.
    let mut relay = Relay::start(&format!(
        "{destinations} --drain-rate 10 --latency-budget 1s --journal-dir {} \
         --dead-letter-file {} --redrive {}",
        dir.arg("journal-1"),
        dir.arg("own-1.jsonl"),
        file.display()
    ))
    .await;
    let (said, n) = redriven(&relay).await;
    let readmitted = n.first().copied().unwrap_or(0) as usize;
    let in_rest = count_lines(&rest);
    println!(
        "redrive_rest: {total} lines: {readmitted} re-admitted, {in_rest} in .rest, {} with no record ({said})",
        total - readmitted - in_rest
    );
    assert_eq!(
        readmitted + in_rest,
        total,
        "re-admitted + in .rest = all lines: {said}"
    );
    assert!(readmitted > 0 && readmitted < LINES as usize, "{said}");
    assert!(
        said.contains(&format!("{in_rest} kept in {}", rest.display())),
        "{said}"
    );
    let rest_text = std::fs::read_to_string(&rest).unwrap_or_default();
    for l in UNREADABLE {
        assert!(rest_text.lines().any(|r| r == l), "kept verbatim: {l}");
    }
    let delivered = || log_a.len() + log_b.len();
    let all = crate::harness::eventually(Duration::from_secs(30), || async {
        delivered() >= readmitted
    })
    .await;
    assert!(all, "delivered {} of {readmitted}", delivered());
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());

    // Redriving the file again would overwrite its .rest: refused.
    let again = format!(
        "{destinations} --allow-destination-cidr 127.0.0.0/8 --no-journal \
         --dead-letter-file {} --redrive {}",
        dir.arg("own-x.jsonl"),
        file.display()
    );
    let (code, _, err) = run(
        &crate::harness::argv(&again)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(".rest holds the lines"), "{err}");
    assert_eq!(count_lines(&rest), in_rest, "untouched");

    // Later, with room: the rest is re-admitted; what can never be stays
    // in .rest.rest.
    let relay = Relay::start(&format!(
        "{destinations} --drain-rate 200 --latency-budget 10s --journal-dir {} \
         --dead-letter-file {} --redrive {}",
        dir.arg("journal-2"),
        dir.arg("own-2.jsonl"),
        rest.display()
    ))
    .await;
    let (said, n) = redriven(&relay).await;
    let second = n.first().copied().unwrap_or(0) as usize;
    let left = count_lines(&dir.join("letters.jsonl.rest.rest"));
    assert_eq!(second, LINES as usize - readmitted, "{said}");
    assert_eq!(left, GONE as usize + UNREADABLE.len(), "{said}");
    let all = crate::harness::eventually(Duration::from_secs(30), || async {
        delivered() >= LINES as usize
    })
    .await;
    assert!(all, "delivered {} of {LINES}", delivered());
    let ids = |log: &Log| -> HashSet<u64> {
        log.hits()
            .iter()
            .filter_map(|h| h.key.parse().ok())
            .collect()
    };
    let odd: HashSet<u64> = (1..=LINES).filter(|i| i % 2 == 1).collect();
    let even: HashSet<u64> = (1..=LINES).filter(|i| i % 2 == 0).collect();
    assert_eq!(ids(&log_a), odd, "a got exactly the lines naming a");
    assert_eq!(ids(&log_b), even, "b got exactly the lines naming b");
    assert_eq!(delivered(), LINES as usize, "each once");
    drop(relay);
}
