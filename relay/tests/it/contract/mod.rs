//! The conformance suite: every rule of the queue contract
//! (`relay/src/queue/contract.rs`), run through the binary against both
//! engines — the local one (journal, destinations set, dead-letter file)
//! and the fleet's (Redis Streams, on a `redis-server` of its own). Each
//! rule is one `async fn(Engine)`; `both!` makes a test of it per engine
//! (`contract::keys::a_key_names_one_request::local` and `::fleet`).
//! Real time on loopback, bounded; counts and generous bounds.
//!
//! `DRIPFEED_RELAY_BIN=path/to/an/older/dripfeed-relay cargo test --test it
//! contract` runs the suite against another build (how each rule was seen
//! to fail before the contract).

mod counts;
mod idle;
mod keys;
mod limits;
mod lookups;
mod overflow;
mod redrive;

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv, http};
use crate::receivers::{self, Hit, Log};
use crate::support_redis::RedisServer;

/// Which engine a relay runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The local one.
    Local,
    /// The fleet's, on Redis.
    Fleet,
}

/// A test of `$rule` per engine.
macro_rules! both {
    ($rule:ident) => {
        mod $rule {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local() {
                super::$rule(crate::contract::Engine::Local).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fleet() {
                if crate::support_redis::available(concat!(stringify!($rule), "::fleet")) {
                    super::$rule(crate::contract::Engine::Fleet).await;
                }
            }
        }
    };
}
pub(crate) use both;

/// A relay of one engine, with its directory (journal, dead-letter file)
/// and, for the fleet's, its Redis.
pub(crate) struct Bench {
    /// The relay.
    pub relay: Relay,
    /// Its engine.
    pub engine: Engine,
    /// Its files.
    pub dir: TempDir,
    /// Its Redis (the fleet's engine).
    pub redis: Option<RedisServer>,
    /// The flags it was started with, after the engine's.
    pub args: String,
}

impl Bench {
    /// A relay of `engine` started with `args` (destinations, rates…); its
    /// journal and dead-letter file in a directory of its own.
    pub(crate) async fn start(engine: Engine, tag: &str, args: &str) -> Bench {
        let dir = TempDir::new(&format!("contract-{tag}"));
        let redis = (engine == Engine::Fleet).then(RedisServer::start);
        let relay =
            Relay::start_with(&argv(&Self::line(engine, &dir, &redis, "n1", args)), &[]).await;
        Bench {
            relay,
            engine,
            dir,
            redis,
            args: args.to_owned(),
        }
    }

    /// The command line of a relay called `node` on `dir` and `redis`.
    fn line(
        engine: Engine,
        dir: &TempDir,
        redis: &Option<RedisServer>,
        node: &str,
        args: &str,
    ) -> String {
        let files = format!(
            "--journal-dir {} --dead-letter-file {} --shutdown-grace 1s",
            dir.arg(&format!("journal-{node}")),
            dir.arg("dead-letter.jsonl"),
        );
        match (engine, redis) {
            (Engine::Fleet, Some(r)) => {
                format!(
                    "--queue redis --redis {} --node-name {node} {files} {args}",
                    r.url()
                )
            }
            _ => format!("{files} {args}"),
        }
    }

    /// Another relay of the same fleet (the fleet's engine only), called `node`.
    pub(crate) async fn another(&self, node: &str) -> Relay {
        let line = Self::line(self.engine, &self.dir, &self.redis, node, &self.args);
        Relay::start_with(&argv(&line), &[]).await
    }

    /// The live state of destination `name` (`GET /v1/destinations/{name}`).
    pub(crate) async fn live(&self, name: &str) -> serde_json::Value {
        get_json(&self.relay.admin_url(&format!("/v1/destinations/{name}"))).await["live"].clone()
    }
}

/// `GET url` as JSON.
pub(crate) async fn get_json(url: &str) -> serde_json::Value {
    let resp = http().get(url).send().await.expect("the relay answers");
    serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default()
}

/// `method url` with a JSON `body`: status and body.
pub(crate) async fn send_json(
    method: reqwest::Method,
    url: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    send_typed(method, url, "application/json", body).await
}

/// `method url` with `body` labelled `content_type`: status and body.
pub(crate) async fn send_typed(
    method: reqwest::Method,
    url: &str,
    content_type: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let resp = http()
        .request(method, url)
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .expect("the relay answers");
    let status = resp.status().as_u16();
    (
        status,
        serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default(),
    )
}

/// What the relay answered a POST: status, body and `Retry-After`.
pub(crate) struct Posted {
    pub status: u16,
    pub body: serde_json::Value,
    pub retry_after: Option<u64>,
}

/// POSTs `body` to `relay` for `destination`, with `headers` besides.
pub(crate) async fn post(
    relay: &Relay,
    destination: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Posted {
    let mut req = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .header("content-type", "application/json")
        .header("x-destination", destination)
        .body(body.to_owned());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the relay answers");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let body = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
    Posted {
        status,
        body,
        retry_after,
    }
}

/// A receiver recording every request in `log`, answering `status` to
/// each after `delay`.
pub(crate) async fn receiver(log: Arc<Log>, status: u16, delay: Duration) -> std::net::SocketAddr {
    let answer = move |_: &Hit, _| {
        use axum::response::IntoResponse;
        axum::http::StatusCode::from_u16(status)
            .expect("a status")
            .into_response()
    };
    receivers::recording(log, delay, Arc::new(answer)).await
}

/// Skips the rest of a test with `engine` unless it is the local one
/// (for what only it does: `--redrive FILE`, the state file).
pub(crate) fn local_only(engine: Engine, what: &str) -> bool {
    if engine == Engine::Fleet {
        eprintln!("{what}: the local engine's only (the README's table says why)");
    }
    engine == Engine::Local
}
