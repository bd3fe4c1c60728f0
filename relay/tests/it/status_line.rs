//! The status line a relay prints each second (`--status-line`) shows
//! every destination while there are few, and past 32 the busiest 32, saying
//! of how many: asking each of 100,000 destinations for its state every
//! second (two round trips to Redis each in a fleet) does not hold.

use std::time::Duration;

use crate::harness::{Relay, argv};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_thirty_two_destinations_the_status_line_shows_the_busiest() {
    let mut line = String::from("--status-line --no-journal --retries 0");
    for i in 0..40 {
        line.push_str(&format!(" --destination d{i:02}=http://127.0.0.1:9/d{i}"));
    }
    let mut relay = Relay::start_with(&argv(&line), &[]).await;
    let summary = relay
        .out
        .find(Duration::from_secs(30), |l| l.contains("depth "))
        .await
        .expect("a status line within 30 s");
    assert!(
        summary.starts_with("32 (the busiest) of 40 destinations: depth"),
        "{summary}"
    );
    // Its destinations' lines, between one summary and the next: 32, not 40.
    let summaries = |all: &[String]| {
        all.iter()
            .filter(|l| l.contains(" destinations: depth"))
            .count()
    };
    let two = crate::harness::eventually(Duration::from_secs(30), || async {
        summaries(&relay.out.all()) >= 2
    })
    .await;
    assert!(two, "a second status line");
    let all = relay.out.all();
    let first = all
        .iter()
        .position(|l| l.contains(" destinations: depth"))
        .unwrap_or(0);
    let tick: Vec<&String> = all[first + 1..]
        .iter()
        .take_while(|l| !l.contains(" destinations: depth"))
        .filter(|l| l.starts_with("  d") && l.contains(" depth "))
        .collect();
    assert_eq!(tick.len(), 32, "{tick:?}");
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}
