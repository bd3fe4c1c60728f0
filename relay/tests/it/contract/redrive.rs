//! A dead letter goes back only to the destination it came from: if that
//! destination is gone, the letter stays where it is (the API names it in
//! `kept`; `--redrive FILE` writes it to `FILE.rest`). And a letter is
//! redriven once, whichever way (the admin API, `--redrive FILE`, a restart
//! with the same command line).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use reqwest::Method;
use serde_json::json;

use super::{Bench, Engine, both, get_json, local_only, post, receiver, send_json};
use crate::harness::{Relay, TempDir, argv, eventually};
use crate::receivers::{self, Hit, Log};

/// Waits until `destination` has `n` dead letters; their ids.
async fn dead_letters(relay: &Relay, destination: &str, n: usize) -> Vec<String> {
    let url = relay.admin_url(&format!("/v1/dead-letters?destination={destination}"));
    let read = || async {
        let page = get_json(&url).await;
        page["dead_letters"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l["id"].as_str().map(str::to_owned))
                    .collect::<Vec<String>>()
            })
            .unwrap_or_default()
    };
    let got = eventually(Duration::from_secs(20), || async {
        read().await.len() >= n
    })
    .await;
    let ids: Vec<String> = read().await;
    assert!(got, "{n} dead letters of {destination}: {ids:?}");
    ids
}

/// Stops `bench`'s relay and moves its dead letters aside (to
/// `moved.jsonl`); its directory, and the command line of a relay
/// delivering to `rx` (as `a`) that redrives them.
async fn aside(bench: Bench, rx: &std::net::SocketAddr) -> (TempDir, String) {
    let mut relay = bench.relay;
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let dl = bench.dir.join("dead-letter.jsonl");
    let moved = bench.dir.join("moved.jsonl");
    std::fs::rename(&dl, &moved).expect("moving the dead letters aside");
    let line = format!(
        "--destination a=http://{rx}/a --journal-dir {} --dead-letter-file {} --redrive {}",
        bench.dir.arg("journal-again"),
        dl.display(),
        moved.display()
    );
    (bench.dir, line)
}

/// Starts a relay with `line` (a `--redrive`), stops it once it has said
/// what it redrove; what it said.
async fn redrive_file(line: &str) -> String {
    let mut relay = Relay::start_with(&argv(line), &[]).await;
    let said = relay
        .out
        .find(Duration::from_secs(30), |l| l.starts_with("redrive "))
        .await
        .unwrap_or_default();
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    said
}

both!(a_dead_letter_goes_back_only_where_it_came_from);

async fn a_dead_letter_goes_back_only_where_it_came_from(engine: Engine) {
    let ok = Arc::new(Log::default());
    let rx = receiver(ok.clone(), 204, Duration::ZERO).await;
    let failing = Arc::new(Log::default());
    let bad = receiver(failing.clone(), 400, Duration::ZERO).await;
    let bench = Bench::start(
        engine,
        "redrive-origin",
        &format!("--destination a=http://{rx}/a --destination b=http://{bad}/b --retries 0"),
    )
    .await;
    let relay = &bench.relay;
    for n in 0..3 {
        assert_eq!(
            post(relay, "b", &[], &format!("{{\"from\":\"b\",\"n\":{n}}}"))
                .await
                .status,
            202
        );
    }
    let ids = dead_letters(relay, "b", 3).await;
    let (status, body) = send_json(
        Method::DELETE,
        &relay.admin_url("/v1/destinations/b"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let url = relay.admin_url("/v1/dead-letters/redrive");
    for ask in [json!({"destination": "b"}), json!({"ids": ids})] {
        let (status, done) = send_json(Method::POST, &url, &ask).await;
        assert_eq!(status, 200, "{ask}: {done}");
        assert_eq!(done["readmitted"], 0, "{ask}: {done}");
        let kept = done["kept"].as_array().cloned().unwrap_or_default();
        assert_eq!(kept.len(), 3, "{ask}: each letter stays, named: {done}");
        for k in &kept {
            assert_eq!(k["reason"], "destination-gone", "{k}");
            assert_eq!(k["destination"], "b", "{k}");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ok.len(), 0, "a got none of b's webhooks");
    assert_eq!(
        dead_letters(relay, "b", 3).await.len(),
        3,
        "they stay where they are"
    );

    if !local_only(engine, "--redrive FILE") {
        return;
    }
    // --redrive FILE: the same, into FILE.rest.
    let (_dir, line) = aside(bench, &rx).await;
    let said = redrive_file(&line).await;
    assert!(said.contains(": 0 re-admitted"), "{said}");
    assert!(
        said.contains("3 for destinations no longer there"),
        "{said}"
    );
    let moved = line.split_whitespace().last().unwrap_or_default();
    let rest = std::fs::read_to_string(format!("{moved}.rest")).unwrap_or_default();
    assert_eq!(rest.lines().count(), 3, "kept in FILE.rest: {rest}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ok.len(), 0, "a got none of b's webhooks");
}

both!(a_dead_letter_is_redriven_once);

async fn a_dead_letter_is_redriven_once(engine: Engine) {
    let log = Arc::new(Log::default());
    let healthy = Arc::new(AtomicBool::new(false));
    let answer = {
        let healthy = healthy.clone();
        move |_: &Hit, _| match healthy.load(Ordering::Relaxed) {
            true => StatusCode::NO_CONTENT.into_response(),
            false => StatusCode::BAD_REQUEST.into_response(),
        }
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let bench = Bench::start(
        engine,
        "redrive-once",
        &format!("--destination a=http://{rx}/a --retries 0"),
    )
    .await;
    let relay = &bench.relay;
    for n in 0..2 {
        assert_eq!(
            post(relay, "a", &[], &format!("{{\"n\":{n}}}"))
                .await
                .status,
            202
        );
    }
    let ids = dead_letters(relay, "a", 2).await;
    healthy.store(true, Ordering::Relaxed);
    let url = relay.admin_url("/v1/dead-letters/redrive");
    // Two redrives of the same letters at once: each letter goes back
    // once, and the one that finds it taken counts it neither readmitted
    // nor refused (the fleet's reported it refused, as if for want of
    // room).
    let body = json!({"ids": ids});
    let ((s1, one), (s2, two)) = tokio::join!(
        send_json(Method::POST, &url, &body),
        send_json(Method::POST, &url, &body),
    );
    assert_eq!((s1, s2), (200, 200), "{one} {two}");
    let sum = |f: &str| one[f].as_u64().unwrap_or(0) + two[f].as_u64().unwrap_or(0);
    assert_eq!((sum("readmitted"), sum("refused")), (2, 0), "{one} {two}");
    let delivered = log
        .until(Duration::from_secs(20), |hits| hits.len() >= 4)
        .await;
    assert!(delivered, "redriven and delivered: {} requests", log.len());
    // Admitted twice each, as posted and as redriven (the fleet's relay
    // counted only the first).
    let a = [("destination", "a")];
    let counted = eventually(Duration::from_secs(10), || async {
        relay.metrics().await.get("leaky_bucket_admitted_total", &a) == 4.0
    })
    .await;
    assert!(
        counted,
        "{}",
        relay.metrics().await.get("leaky_bucket_admitted_total", &a)
    );
    let (_, again) = send_json(Method::POST, &url, &json!({"ids": ids})).await;
    assert_eq!(again["readmitted"], 0, "redriven once: {again}");

    if !local_only(engine, "--redrive FILE") {
        return;
    }
    // The same letters through --redrive FILE, twice (a restart with the
    // same command line): never again.
    let (_dir, line) = aside(bench, &rx).await;
    for round in 0..2 {
        let said = redrive_file(&line).await;
        assert!(said.contains(": 0 re-admitted"), "round {round}: {said}");
        assert!(said.contains("2 redriven before"), "round {round}: {said}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        log.len(),
        4,
        "each letter reached the receiver once after its redrive"
    );
}

both!(an_event_copy_never_goes_to_an_endpoint_made_again_under_another_application);

/// An event's copies dead-lettered by endpoint `x` of `appa` are not
/// `appb`'s to receive once `x` is deleted and made again under `appb`:
/// a redrive keeps them, named `destination-gone` (for good), never
/// counts them `refused` (for now: a later redrive would never take them).
async fn an_event_copy_never_goes_to_an_endpoint_made_again_under_another_application(
    engine: Engine,
) {
    let failing = Arc::new(Log::default());
    let bad = receiver(failing.clone(), 400, Duration::ZERO).await;
    let ok = Arc::new(Log::default());
    let rx = receiver(ok.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(engine, "redrive-app", "--retries 0").await;
    let relay = &bench.relay;
    for app in ["appa", "appb"] {
        let url = relay.admin_url(&format!("/v1/applications/{app}"));
        assert_eq!(send_json(Method::PUT, &url, &json!({})).await.0, 201);
    }
    let x = relay.admin_url("/v1/applications/appa/endpoints/x");
    let (status, v) = send_json(Method::PUT, &x, &json!({"url": format!("http://{bad}/x")})).await;
    assert_eq!(status, 201, "{v}");
    let events = relay.url("/v1/applications/appa/events");
    for n in 0..3 {
        let (status, v) = send_json(
            Method::POST,
            &events,
            &json!({"type": "t.x", "payload": {"n": n}}),
        )
        .await;
        assert_eq!((status, &v["endpoints"]), (202, &json!(1)), "{v}");
    }
    dead_letters(relay, "x", 3).await;
    assert_eq!(send_json(Method::DELETE, &x, &json!({})).await.0, 202);
    let again = relay.admin_url("/v1/applications/appb/endpoints/x");
    let body = json!({"url": format!("http://{rx}/x")});
    let made = eventually(Duration::from_secs(30), || async {
        send_json(Method::PUT, &again, &body).await.0 == 201
    })
    .await;
    assert!(made, "x made again under appb");
    let url = relay.admin_url("/v1/dead-letters/redrive");
    for _ in 0..2 {
        let (status, done) = send_json(Method::POST, &url, &json!({"destination": "x"})).await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(
            (&done["readmitted"], &done["refused"]),
            (&json!(0), &json!(0)),
            "{done}"
        );
        let kept = done["kept"].as_array().cloned().unwrap_or_default();
        assert_eq!(kept.len(), 3, "{done}");
        assert!(
            kept.iter().all(|k| k["reason"] == "destination-gone"),
            "{done}"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ok.len(), 0, "appb's x got none of appa's copies");
}
