//! One check of a destination's limits, whatever its door: a `PUT` is
//! refused (422) for what the configuration refuses (a budget × rate the
//! byte budget cannot hold), never a 201 followed by a 400 on every post or
//! a ring of hundreds of MiB on the first one; and a state file that names
//! a destination twice is refused at start.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{Bench, Engine, both, get_json, local_only, post, receiver, send_json, send_typed};
use crate::harness::{TempDir, run};
use crate::receivers::Log;

both!(a_put_is_checked_as_the_configuration_is);

async fn a_put_is_checked_as_the_configuration_is(engine: Engine) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(engine, "limits", &format!("--destination a=http://{rx}/a")).await;
    let relay = &bench.relay;
    let url = relay.admin_url("/v1/destinations/big");
    let rss = relay.rss_kib();
    for budget in ["20000s", "10000000s"] {
        let body = json!({"url": format!("http://{rx}/big"), "budget": budget});
        let (status, answer) = send_json(Method::PUT, &url, &body).await;
        assert_eq!(status, 422, "{budget}: {answer}");
        assert_eq!(answer["type"], "urn:dripfeed:problem:bad-destination");
        assert!(
            answer["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("more than one queue may hold"),
            "{answer}"
        );
    }
    // What is taken can take a webhook, and holds no outsized ring.
    let body = json!({"url": format!("http://{rx}/big"), "budget": "10s"});
    let (status, answer) = send_json(Method::PUT, &url, &body).await;
    assert_eq!(status, 201, "{answer}");
    let p = post(relay, "big", &[], "{\"n\":1}").await;
    assert_eq!(p.status, 202, "{}", p.body);
    assert!(
        relay.rss_kib() < rss + 64 * 1024,
        "RSS {} KiB after, {rss} KiB before",
        relay.rss_kib()
    );

    // The configuration refuses the same with the same words.
    let line = format!("--destinations {}", write_big(&bench.dir, &rx));
    let mut args: Vec<&str> = vec!["check-config", "/dev/null"];
    if engine == Engine::Fleet {
        args.extend(["--queue", "redis", "--redis", "redis://127.0.0.1:1/"]);
    }
    args.extend(line.split_whitespace());
    let (code, _, err) = run(&args, &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("destinations.big") && err.contains("more than one queue may hold"),
        "{err}"
    );
}

/// A `--destinations` file naming `big` with a budget of 20000 s.
fn write_big(dir: &TempDir, rx: &std::net::SocketAddr) -> String {
    let path = dir.join("big.json");
    std::fs::write(
        &path,
        format!(r#"[{{"name": "big", "url": "http://{rx}/big", "budget": "20000s"}}]"#),
    )
    .expect("a destinations file");
    path.display().to_string()
}

both!(a_state_file_naming_a_destination_twice_is_refused);

async fn a_state_file_naming_a_destination_twice_is_refused(engine: Engine) {
    if !local_only(engine, "the state file") {
        return;
    }
    let dir = TempDir::new("contract-state-twice");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).expect("a state directory");
    let one = json!({"name": "twice", "url": "http://127.0.0.1:9/a"});
    let two = json!({"name": "twice", "url": "http://127.0.0.1:9/b"});
    std::fs::write(
        state.join("state.json"),
        json!({"version": 1, "destinations": [one, two]}).to_string(),
    )
    .expect("a state file");
    let journal = dir.arg("journal");
    let state_arg = state.display().to_string();
    let (code, _, err) = run(
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--allow-destination-cidr",
            "127.0.0.0/8",
            "--destination",
            "a=http://127.0.0.1:9/",
            "--journal-dir",
            &journal,
            "--state-dir",
            &state_arg,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "refused, not started: {err}");
    assert!(err.contains("twice"), "{err}");
}

both!(an_endpoint_keeps_its_application_and_names_only_one_that_exists);

/// An endpoint's application is fixed once set, whichever route changes
/// it (its events' history stays its application's): a `PUT` or `PATCH`
/// through `/v1/destinations` that would move it, drop it, or make a plain
/// destination an endpoint is refused (422), and one naming an
/// application that does not exist is 404 (never making one).
async fn an_endpoint_keeps_its_application_and_names_only_one_that_exists(engine: Engine) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(engine, "fixed-app", "").await;
    let relay = &bench.relay;
    let url = format!("http://{rx}/x");
    for app in ["appa", "appb"] {
        let (status, v) = send_json(
            Method::PUT,
            &relay.admin_url(&format!("/v1/applications/{app}")),
            &json!({}),
        )
        .await;
        assert_eq!(status, 201, "{v}");
    }
    let x = relay.admin_url("/v1/applications/appa/endpoints/x");
    let (status, v) = send_json(Method::PUT, &x, &json!({"url": url})).await;
    assert_eq!(status, 201, "{v}");
    let dest = relay.admin_url("/v1/destinations/x");
    for (method, body) in [
        (Method::PUT, json!({"url": url})),
        (Method::PUT, json!({"url": url, "application": "appb"})),
        (Method::PATCH, json!({"application": "appb"})),
        (Method::PATCH, json!({"application": null})),
    ] {
        let (status, v) = match method {
            Method::PATCH => {
                send_typed(method.clone(), &dest, "application/merge-patch+json", &body).await
            }
            _ => send_json(method.clone(), &dest, &body).await,
        };
        assert_eq!(status, 422, "{method} {body}: {v}");
        assert!(
            v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("application"),
            "{v}"
        );
    }
    let v = get_json(&x).await;
    assert_eq!(v["application"], "appa", "{v}");

    let plain = relay.admin_url("/v1/destinations/plain");
    let (status, v) = send_json(Method::PUT, &plain, &json!({"url": url})).await;
    assert_eq!(status, 201, "{v}");
    let body = json!({"url": url, "application": "appa"});
    let (status, v) = send_json(Method::PUT, &plain, &body).await;
    assert_eq!(status, 422, "a plain destination made an endpoint: {v}");

    let typo = relay.admin_url("/v1/destinations/q");
    let body = json!({"url": url, "application": "apa"});
    let (status, v) = send_json(Method::PUT, &typo, &body).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["type"], "urn:dripfeed:problem:unknown-application", "{v}");
    let status = |url: String| async move {
        let resp = crate::harness::http()
            .get(url)
            .send()
            .await
            .expect("an answer");
        resp.status().as_u16()
    };
    let apa = relay.admin_url("/v1/applications/apa");
    assert_eq!(status(apa).await, 404, "no application made by a typo");
    assert_eq!(status(typo).await, 404, "nor the destination");
}
