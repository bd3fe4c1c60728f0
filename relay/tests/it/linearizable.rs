//! Nothing answered is ever undone: admin changes are linearizable.
//! `PATCH`es of one destination at once all apply (neither merges onto a
//! stale copy and overwrites the other), with the local engine and across
//! two relays of a fleet; a `PATCH` racing a `DELETE` never answers 201
//! nor brings the destination back; `ETag` and `If-Match` make a change
//! conditional (412 once it no longer holds), a body read on one relay
//! and its tag being of one value.
//!
//! The races are run for many rounds: before this change, the local
//! engine lost one of four concurrent patches in all 40 rounds, the
//! fleet in 10 of 12, and a patch behind a deletion made it again.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv, digest, eventually, http};

const TOKEN: &str = "linearizable-admin-token";

/// An admin API answer: status, `ETag`, JSON body.
pub(crate) struct Answer {
    pub status: u16,
    pub etag: Option<String>,
    pub body: serde_json::Value,
}

/// `method` on `relay`'s admin API at `path` with `body` and `headers`.
pub(crate) async fn admin(
    relay: &Relay,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut req = http()
        .request(method, relay.admin_url(path))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = resp.text().await.unwrap_or_default();
    Answer {
        status,
        etag,
        body: serde_json::from_str(&text).unwrap_or_default(),
    }
}

fn path(name: &str) -> String {
    format!("/v1/destinations/{name}")
}

async fn put(relay: &Relay, name: &str) -> Answer {
    let body = serde_json::json!({"url": "http://127.0.0.1:9/h", "rate": 5, "budget": "1s"});
    admin(relay, reqwest::Method::PUT, &path(name), Some(body), &[]).await
}

async fn patch(relay: &Relay, name: &str, body: serde_json::Value) -> Answer {
    admin(relay, reqwest::Method::PATCH, &path(name), Some(body), &[]).await
}

async fn get(relay: &Relay, name: &str) -> Answer {
    admin(relay, reqwest::Method::GET, &path(name), None, &[]).await
}

/// Patches `name`'s rate on `a` and its budget on `b` at once (`b` after
/// `stagger`); whether both changes stand afterwards, read on `a` and `b`.
#[cfg(feature = "redis")]
async fn both_stand(a: &Relay, b: &Relay, name: &str, stagger: Duration) -> bool {
    let rate = patch(a, name, serde_json::json!({"rate": 7}));
    let budget = async {
        tokio::time::sleep(stagger).await;
        patch(b, name, serde_json::json!({"budget": "3s"})).await
    };
    let (r, g) = tokio::join!(rate, budget);
    assert_eq!((r.status, g.status), (200, 200), "{} {}", r.body, g.body);
    let stands = |v: &serde_json::Value| v["rate"] == 7.0 && v["budget_ms"] == 3000;
    // Read where the last change was made, and (a fleet) everywhere soon.
    let seen = eventually(Duration::from_secs(5), || async {
        stands(&get(a, name).await.body) && stands(&get(b, name).await.body)
    })
    .await;
    if !seen {
        eprintln!(
            "{name}: {} / {}",
            get(a, name).await.body,
            get(b, name).await.body
        );
    }
    seen
}

/// Patches four fields of `name` at once; whether all four stand after.
async fn four_stand(relay: &Relay, name: &str) -> bool {
    let (r, g, c, u) = tokio::join!(
        patch(relay, name, serde_json::json!({"rate": 7})),
        patch(relay, name, serde_json::json!({"budget": "3s"})),
        patch(relay, name, serde_json::json!({"ceiling": 9})),
        patch(
            relay,
            name,
            serde_json::json!({"url": "http://127.0.0.1:9/moved"})
        ),
    );
    for a in [&r, &g, &c, &u] {
        assert_eq!(a.status, 200, "{}", a.body);
    }
    let v = get(relay, name).await.body;
    let all = v["rate"] == 7.0
        && v["budget_ms"] == 3000
        && v["ceiling"] == 9.0
        && v["url"] == "http://127.0.0.1:9/moved";
    if !all {
        eprintln!("{name}: {v}");
    }
    all
}

/// The flags of fleet relay `name` on `redis`, its files in `dir`, with
/// `extra` after them.
fn fleet_node(
    redis: &crate::support_redis::RedisServer,
    dir: &TempDir,
    name: &str,
    extra: &str,
) -> Vec<String> {
    argv(&format!(
        "--queue redis --redis {} --node-name {name} --destination first=http://127.0.0.1:9/h \
         --admin-token-sha256 {} --journal-dir {} --dead-letter-file {} {extra}",
        redis.url(),
        digest(TOKEN),
        dir.arg(&format!("journal-{name}")),
        dir.arg(&format!("dl-{name}.jsonl")),
    ))
}

fn local_args(dir: &TempDir) -> Vec<String> {
    argv(&format!(
        "--destination first=http://127.0.0.1:9/h --admin-token-sha256 {} --journal-dir {} \
         --dead-letter-file {} --max-destinations 400 --shutdown-grace 1s",
        digest(TOKEN),
        dir.arg("journal"),
        dir.arg("dl.jsonl"),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_both_apply_and_a_patch_never_remakes_a_deleted_destination() {
    let dir = TempDir::new("linearizable");
    let relay = Arc::new(Relay::start_with(&local_args(&dir), &[]).await);

    // Four patches of one destination at once, 40 rounds: none lost.
    let mut lost = 0;
    for round in 0..40 {
        let name = format!("p{round}");
        assert_eq!(put(&relay, &name).await.status, 201);
        if !four_stand(&relay, &name).await {
            lost += 1;
        }
    }
    assert_eq!(
        lost, 0,
        "rounds where a patch answered 200 was undone by another"
    );

    // Eight patches racing a deletion, 40 rounds: never 201, never back.
    for round in 0..40 {
        let name = format!("x{round}");
        assert_eq!(put(&relay, &name).await.status, 201);
        let patches: Vec<_> = (0..8)
            .map(|k| {
                let (relay, name) = (relay.clone(), name.clone());
                tokio::spawn(async move {
                    patch(&relay, &name, serde_json::json!({"rate": 6 + k}))
                        .await
                        .status
                })
            })
            .collect();
        let deleted = admin(&relay, reqwest::Method::DELETE, &path(&name), None, &[]).await;
        assert_eq!(deleted.status, 202, "{}", deleted.body);
        for p in patches {
            let status = p.await.unwrap();
            assert!(
                [200, 404, 409].contains(&status),
                "{name}: a patch racing a delete answered {status}"
            );
        }
        let gone = eventually(Duration::from_secs(10), || async {
            get(&relay, &name).await.status == 404
        })
        .await;
        assert!(
            gone,
            "{name} came back after its deletion: {}",
            get(&relay, &name).await.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etags_make_changes_conditional() {
    let dir = TempDir::new("etags");
    let relay = Relay::start_with(&local_args(&dir), &[]).await;
    let made = put(&relay, "e").await;
    assert_eq!(made.status, 201, "{}", made.body);
    let first = made.etag.clone().expect("a PUT answers its ETag");
    assert_eq!(get(&relay, "e").await.etag.as_deref(), Some(first.as_str()));

    // If-None-Match: * makes only what does not exist.
    let body = serde_json::json!({"url": "http://127.0.0.1:9/h"});
    let again = admin(
        &relay,
        reqwest::Method::PUT,
        &path("e"),
        Some(body.clone()),
        &[("if-none-match", "*")],
    )
    .await;
    assert_eq!(again.status, 412, "{}", again.body);
    assert_eq!(
        again.body["type"],
        "urn:dripfeed:problem:precondition-failed"
    );
    let fresh = admin(
        &relay,
        reqwest::Method::PUT,
        &path("f"),
        Some(body),
        &[("if-none-match", "*")],
    )
    .await;
    assert_eq!(fresh.status, 201, "{}", fresh.body);

    // A change with the tag read applies and moves the tag; the old tag
    // then refuses the next change, and nothing changes.
    let moved = admin(
        &relay,
        reqwest::Method::PATCH,
        &path("e"),
        Some(serde_json::json!({"rate": 8})),
        &[("if-match", &first)],
    )
    .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let second = moved.etag.expect("a PATCH answers its ETag");
    assert_ne!(second, first);
    let stale = admin(
        &relay,
        reqwest::Method::PATCH,
        &path("e"),
        Some(serde_json::json!({"rate": 9})),
        &[("if-match", &first)],
    )
    .await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert_eq!(get(&relay, "e").await.body["rate"], 8.0);
    let stale_delete = admin(
        &relay,
        reqwest::Method::DELETE,
        &path("e"),
        None,
        &[("if-match", &first)],
    )
    .await;
    assert_eq!(stale_delete.status, 412, "{}", stale_delete.body);
    let deleted = admin(
        &relay,
        reqwest::Method::DELETE,
        &path("e"),
        None,
        &[("if-match", &second)],
    )
    .await;
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    // Its tag no longer holds once it is deleted (412, not 404).
    let gone = admin(
        &relay,
        reqwest::Method::PATCH,
        &path("e"),
        Some(serde_json::json!({"rate": 9})),
        &[("if-match", &second)],
    )
    .await;
    assert_eq!(gone.status, 412, "{}", gone.body);
    let bad = admin(
        &relay,
        reqwest::Method::PATCH,
        &path("f"),
        Some(serde_json::json!({"rate": 9})),
        &[("if-none-match", "\"x\"")],
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_patching_one_destination_both_apply() {
    use crate::support_redis;
    if !support_redis::available("two_relays_patching_one_destination_both_apply") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let dir = TempDir::new("linearizable-fleet");
    let node = |name: &str| fleet_node(&redis, &dir, name, "--max-destinations 100");
    let a = Relay::start_with(&node("a"), &[]).await;
    let b = Relay::start_with(&node("b"), &[]).await;
    let mut lost = 0;
    for round in 0..12 {
        let name = format!("f{round}");
        assert_eq!(put(&a, &name).await.status, 201);
        // b has seen it (its copy is what the old code merged onto).
        let seen = eventually(Duration::from_secs(5), || async {
            get(&b, &name).await.status == 200
        })
        .await;
        assert!(seen, "{name} reached b");
        if !both_stand(&a, &b, &name, Duration::from_millis(100)).await {
            lost += 1;
        }
    }
    assert_eq!(
        lost, 0,
        "rounds where a change answered 200 was undone by the other relay's"
    );
    // The tag is the fleet's: read on b, it conditions a change on a.
    let tag = get(&b, "f0").await.etag.expect("an ETag on b");
    let on_a = admin(
        &a,
        reqwest::Method::PATCH,
        &path("f0"),
        Some(serde_json::json!({"rate": 11})),
        &[("if-match", &tag)],
    )
    .await;
    assert_eq!(on_a.status, 200, "{}", on_a.body);
    let stale = admin(
        &b,
        reqwest::Method::PATCH,
        &path("f0"),
        Some(serde_json::json!({"rate": 12})),
        &[("if-match", &tag)],
    )
    .await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    // Read on b at once after a change on a, a body and its tag are of
    // one value: the tag of a's change comes with a's change, so a
    // conditional change on b has seen what it changes (b showed its own
    // copy, a's change not yet applied, under the fleet's new tag, and a
    // change made on that tag undid a's unseen: every round).
    let mut mixed = 0;
    for round in 0..10 {
        let rate = 20 + round;
        let on_a = patch(&a, "f0", serde_json::json!({"rate": rate})).await;
        assert_eq!(on_a.status, 200, "{}", on_a.body);
        let read = get(&b, "f0").await;
        if read.etag == on_a.etag && read.body["rate"].as_f64() != Some(f64::from(rate)) {
            mixed += 1;
        }
    }
    assert_eq!(mixed, 0, "reads on b of a's tag with the body before it");
}

/// An application's `ETag` makes its changes conditional, as a
/// destination's does (before, `If-Match` on an application was ignored).
async fn applications_are_conditional(relay: &Relay) {
    let path = "/v1/applications/tagged";
    let body = |d: &str| Some(serde_json::json!({ "description": d }));
    let made = admin(relay, reqwest::Method::PUT, path, body("a"), &[]).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let first = made.etag.expect("a PUT answers its ETag");
    let read = admin(relay, reqwest::Method::GET, path, None, &[]).await;
    assert_eq!(read.etag.as_deref(), Some(first.as_str()));
    let none = [("if-none-match", "*")];
    let again = admin(relay, reqwest::Method::PUT, path, body("b"), &none).await;
    assert_eq!(again.status, 412, "{}", again.body);
    let when = [("if-match", first.as_str())];
    let changed = admin(relay, reqwest::Method::PUT, path, body("b"), &when).await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    let second = changed.etag.expect("a PUT answers its ETag");
    assert_ne!(second, first);
    let stale = admin(relay, reqwest::Method::PUT, path, body("c"), &when).await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    let stale = admin(relay, reqwest::Method::DELETE, path, None, &when).await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    let now = [("if-match", second.as_str())];
    let deleted = admin(relay, reqwest::Method::DELETE, path, None, &now).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let gone = admin(relay, reqwest::Method::DELETE, path, None, &now).await;
    assert_eq!(gone.status, 412, "its tag no longer holds: {}", gone.body);
    // Made again with the same body: another making, another tag.
    let again = admin(relay, reqwest::Method::PUT, path, body("b"), &[]).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_ne!(again.etag.as_deref(), Some(second.as_str()));
    let stale = admin(relay, reqwest::Method::DELETE, path, None, &now).await;
    assert_eq!(
        stale.status, 412,
        "a tag of the deleted one: {}",
        stale.body
    );
}

/// `rounds` of an endpoint's `PUT` on `b` racing its application's
/// `DELETE` on `a` (one relay, or two of a fleet): either the endpoint
/// goes with its application or its `PUT` is refused; an application whose
/// `DELETE` was answered 200 stays gone, and no endpoint outlives its
/// application (before, 93 of 100 rounds left one: an orphan taking
/// webhooks, or the application made again by the endpoint's `PUT`).
/// The applications answered deleted.
async fn endpoints_go_with_their_application(a: &Relay, b: &Relay, rounds: usize) -> Vec<String> {
    let mut deleted = Vec::new();
    for round in 0..rounds {
        let (app, ep) = (format!("shop{round}"), format!("shop{round}-ep"));
        let app_path = format!("/v1/applications/{app}");
        let made = admin(
            a,
            reqwest::Method::PUT,
            &app_path,
            Some(serde_json::json!({"description": "orig"})),
            &[],
        )
        .await;
        assert_eq!(made.status, 201, "{}", made.body);
        let seen = eventually(Duration::from_secs(5), || async {
            admin(b, reqwest::Method::GET, &app_path, None, &[])
                .await
                .status
                == 200
        })
        .await;
        assert!(seen, "{app} reached the other relay");
        let body = serde_json::json!({"url": "http://127.0.0.1:9/h"});
        let endpoint = format!("/v1/applications/{app}/endpoints/{ep}");
        let (put, del) = tokio::join!(
            admin(b, reqwest::Method::PUT, &endpoint, Some(body), &[]),
            admin(a, reqwest::Method::DELETE, &app_path, None, &[]),
        );
        assert!([201, 404].contains(&put.status), "{ep}: {}", put.body);
        assert_eq!(del.status, 200, "{app}: {}", del.body);
        deleted.push(app.clone());
        // Settled on both relays: the application gone, its endpoint too.
        let settled = eventually(Duration::from_secs(10), || async {
            let mut gone = true;
            for r in [a, b] {
                let app_now = admin(r, reqwest::Method::GET, &app_path, None, &[]).await;
                gone &= app_now.status == 404;
                gone &= get(r, &ep).await.status == 404;
            }
            gone
        })
        .await;
        assert!(
            settled,
            "round {round}: the endpoint's PUT answered {}, the application's DELETE {}; now \
             the application answers {} and its endpoint {}",
            put.status,
            del.status,
            admin(a, reqwest::Method::GET, &app_path, None, &[])
                .await
                .status,
            get(b, &ep).await.body
        );
    }
    deleted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_never_outlives_its_application() {
    let dir = TempDir::new("linearizable-apps");
    let mut relay = Relay::start_with(&local_args(&dir), &[]).await;
    applications_are_conditional(&relay).await;
    let deleted = endpoints_go_with_their_application(&relay, &relay, 40).await;
    // And after a restart, as answered.
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(15)).await.success());
    let relay = Relay::start_with(&local_args(&dir), &[]).await;
    for app in &deleted {
        let now = admin(
            &relay,
            reqwest::Method::GET,
            &format!("/v1/applications/{app}"),
            None,
            &[],
        )
        .await;
        assert_eq!(
            now.status, 404,
            "{app} came back at the restart: {}",
            now.body
        );
        assert_eq!(
            get(&relay, &format!("{app}-ep")).await.status,
            404,
            "{app}'s endpoint"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_a_fleet_an_endpoint_never_outlives_its_application() {
    use crate::support_redis;
    if !support_redis::available("across_a_fleet_an_endpoint_never_outlives_its_application") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let dir = TempDir::new("linearizable-fleet-apps");
    let node = |name: &str| {
        fleet_node(
            &redis,
            &dir,
            name,
            "--max-destinations 400 --shutdown-grace 1s",
        )
    };
    let a = Relay::start_with(&node("a"), &[]).await;
    let b = Relay::start_with(&node("b"), &[]).await;
    applications_are_conditional(&a).await;
    endpoints_go_with_their_application(&a, &b, 20).await;

    // A deletion cut short (its relay died after the mark): a relay that
    // starts then sees the application as being deleted too (before, it
    // showed it live, from its endpoint), and a DELETE of it ends it.
    let app = "/v1/applications/cut";
    assert_eq!(
        admin(&a, reqwest::Method::PUT, app, None, &[]).await.status,
        201
    );
    let ep = serde_json::json!({"url": "http://127.0.0.1:9/h"});
    let made = admin(
        &a,
        reqwest::Method::PUT,
        &format!("{app}/endpoints/cut-ep"),
        Some(ep),
        &[],
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.body);
    redis.cli(&[
        "HSET",
        "dripfeed:map:{webhook_relay:destinations}",
        "app:cut",
        "\"app_deleting\"",
    ]);
    let c = Relay::start_with(&node("c"), &[]).await;
    let shown = admin(&c, reqwest::Method::GET, app, None, &[]).await;
    assert_eq!(
        shown.status, 404,
        "a relay started meanwhile: {}",
        shown.body
    );
    let again = admin(&c, reqwest::Method::PUT, app, None, &[]).await;
    assert_eq!(again.status, 409, "{}", again.body);
    let ended = admin(&c, reqwest::Method::DELETE, app, None, &[]).await;
    assert_eq!(
        (ended.status, &ended.body["endpoints"]),
        (200, &serde_json::json!(1)),
        "{}",
        ended.body
    );
    let gone = eventually(Duration::from_secs(10), || async {
        get(&a, "cut-ep").await.status == 404 && get(&c, "cut-ep").await.status == 404
    })
    .await;
    assert!(gone, "its endpoint went with it");
}
