//! A fleet refuses a Redis that would forget what it acknowledged: no
//! append-only file, an fsync below what `--redis-durability` accepts, a
//! Redis that refuses `CONFIG` without the operator saying what it keeps;
//! and a running relay whose Redis stops keeping it answers `/readyz` 503
//! saying why. (Before, ten webhooks answered 202 on `--save ''
//! --appendonly no` were all lost to a Redis restart, without a word.)

use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually, http, run};
use crate::support_redis::{self, RedisServer};

/// The flags of a fleet relay on `redis`, with `extra`.
fn fleet(redis: &RedisServer, dir: &TempDir, extra: &str) -> String {
    format!(
        "--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --allow-destination-cidr 127.0.0.0/8 \
         --queue redis --redis {} --node-name n1 --journal-dir {} --dead-letter-file {} \
         --destination a=http://127.0.0.1:9/a {extra}",
        redis.url(),
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl"),
    )
}

/// Runs a fleet relay to its end: exit code and stderr.
async fn refused(redis: &RedisServer, dir: &TempDir, extra: &str) -> (i32, String) {
    let line = fleet(redis, dir, extra);
    let args: Vec<&str> = line.split_whitespace().collect();
    let (code, _, err) = tokio::time::timeout(Duration::from_secs(60), run(&args, &[]))
        .await
        .expect("the relay ends");
    (code, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_refuses_a_redis_that_would_forget() {
    if !support_redis::available("a_fleet_refuses_a_redis_that_would_forget") {
        return;
    }
    let dir = TempDir::new("durability");
    // No append-only file: refused at start, naming the setting.
    let forgetful = RedisServer::start_forgetful();
    let (code, err) = refused(&forgetful, &dir, "").await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("redis_durability") && err.contains("appendonly no"),
        "{err}"
    );
    // Unless the operator says so.
    let accepted = Relay::spawn(
        &crate::harness::argv(&fleet(&forgetful, &dir, "--redis-durability none")),
        &[],
    )
    .await;
    drop(accepted);

    // Every second is less than always.
    let everysec = RedisServer::start();
    let (code, err) = refused(&everysec, &dir, "--redis-durability always").await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("appendfsync everysec"), "{err}");

    // A Redis that refuses CONFIG needs the operator's word.
    let managed = RedisServer::start_with_args(&["--rename-command", "CONFIG", ""]);
    let (code, err) = refused(&managed, &dir, "").await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--redis-durability"), "{err}");
    let trusted = Relay::spawn(
        &crate::harness::argv(&fleet(&managed, &dir, "--redis-durability everysec")),
        &[],
    )
    .await;
    drop(trusted);

    // A Redis that stops keeping what it acknowledged: /readyz says so.
    let relay = Relay::spawn(&crate::harness::argv(&fleet(&everysec, &dir, "")), &[]).await;
    let readyz = || async {
        let resp = http()
            .get(relay.admin_url("/readyz"))
            .send()
            .await
            .expect("the admin listener answers");
        (
            resp.status().as_u16(),
            resp.text().await.unwrap_or_default(),
        )
    };
    assert_eq!(readyz().await.0, 200);
    everysec.cli(&["CONFIG", "SET", "appendonly", "no"]);
    let down = eventually(Duration::from_secs(30), || async {
        readyz().await.0 == 503
    })
    .await;
    let (status, body) = readyz().await;
    assert!(down, "{status} {body}");
    assert!(
        body.contains("redis_durability") && body.contains("appendonly no"),
        "{body}"
    );
    everysec.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    let up = eventually(Duration::from_secs(30), || async {
        readyz().await.0 == 200
    })
    .await;
    assert!(up, "{:?}", readyz().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_relay_with_tenant_quotas_starts_while_redis_is_down() {
    if !support_redis::available("a_fleet_relay_with_tenant_quotas_starts_while_redis_is_down") {
        return;
    }
    let dir = TempDir::new("redis-down");
    let port = RedisServer::free_port();
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "tenant_rate = 50\n[[tenants]]\nname = \"acme\"\n[[tenants.keys]]\nsha256 = \"{}\"\n",
            crate::harness::digest("key-acme")
        ),
    )
    .unwrap();
    let rx = crate::contract::receiver(
        std::sync::Arc::new(crate::receivers::Log::default()),
        204,
        Duration::ZERO,
    )
    .await;
    let line = format!(
        "--config {} --queue redis --redis redis://127.0.0.1:{port}/ --node-name n1 \
         --journal-dir {} --dead-letter-file {} --destination a=http://{rx}/a",
        file.display(),
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl"),
    );
    // Starts (before, "redis unavailable" and exit 1), not ready.
    let relay = Relay::start(&line).await;
    let post = || async {
        http()
            .post(relay.url("/v1/webhooks/deliver"))
            .bearer_auth("key-acme")
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .map_or(0, |r| r.status().as_u16())
    };
    assert_eq!(post().await, 503, "no 202 it cannot keep");
    // Redis comes: the relay is ready and takes webhooks.
    let _redis = RedisServer::start_on(port);
    let taken = eventually(Duration::from_secs(30), || async { post().await == 202 }).await;
    assert!(taken, "a webhook is taken once Redis answers");
}
