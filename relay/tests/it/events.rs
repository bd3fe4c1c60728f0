//! Events, not addresses, in both engines: an application with four
//! endpoints — one subscribed to `invoice.*`, one to `invoice.paid` only,
//! one to every type but fragile (40/s, a receiver that serves 40/s, its
//! latency growing with its backlog), one dead (connection refused;
//! `--retries 1`, a 1 s budget) — gets 600 events of mixed types posted at 100/s, the
//! relay SIGKILLed half way and started again on its directory (the
//! fleet: two relays on one Redis taking turns, one of them SIGKILLed and
//! started again). Every copy ends in one
//! place: each live endpoint receives each event it subscribes to (more
//! than once only for deliveries in flight at the kill); where the
//! fragile one's queue overflowed, the copy is dead-lettered with reason
//! `overflow` and `recover` delivers it; no endpoint receives a type it
//! does not take; the fragile one never gets more than its rate + 1 in
//! any second; the dead one's copies are all dead-lettered, and once it
//! is back `recover` delivers every one. Every copy's history is kept.
//!
//! Real time and real processes (a loopback integration test): bounded in
//! time and count, asserting counts and generous bounds only.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

use crate::contract::{Bench, Engine, both};
use crate::harness::{Relay, TempDir, argv, eventually, http};

const EVENTS: usize = 600;
const TYPES: [&str; 4] = [
    "invoice.paid",
    "invoice.created",
    "user.created",
    "user.deleted",
];
/// The fragile endpoint's rate (and what its receiver serves).
const FRAGILE: u32 = 40;

/// What each endpoint received: event ids (with how many times), the
/// types, arrivals per second, and when each id first arrived.
#[derive(Default)]
struct Seen {
    ids: Mutex<HashMap<(String, String), u32>>,
    types: Mutex<HashMap<String, HashSet<String>>>,
    seconds: Mutex<HashMap<String, BTreeMap<u64, u32>>>,
    first: Mutex<HashMap<(String, String), Instant>>,
}

impl Seen {
    fn got(&self, endpoint: &str) -> HashSet<String> {
        let ids = self.ids.lock().unwrap();
        ids.keys()
            .filter(|(e, _)| e == endpoint)
            .map(|(_, id)| id.clone())
            .collect()
    }

    fn duplicates(&self, endpoint: &str) -> u32 {
        let ids = self.ids.lock().unwrap();
        ids.iter()
            .filter(|((e, _), _)| e == endpoint)
            .map(|(_, n)| n - 1)
            .sum()
    }
}

/// A receiver on `listener` for every endpoint (by path); the fragile one
/// serves one request at a time, 25 ms each (its rate).
fn receive(seen: Arc<Seen>, listener: tokio::net::TcpListener, epoch: Instant) {
    let fragile = Arc::new(tokio::sync::Semaphore::new(1));
    let app = Router::new().route(
        "/{endpoint}",
        post(
            move |axum::extract::Path(endpoint): axum::extract::Path<String>,
                  headers: HeaderMap| {
                let (seen, fragile) = (seen.clone(), fragile.clone());
                async move {
                    if endpoint == "fragile" {
                        let _one = fragile.acquire().await;
                        tokio::time::sleep(Duration::from_millis(1000 / u64::from(FRAGILE))).await;
                    }
                    let header = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let (id, kind) = (header("webhook-id"), header("webhook-event-type"));
                    let now = Instant::now();
                    *seen
                        .ids
                        .lock()
                        .unwrap()
                        .entry((endpoint.clone(), id.clone()))
                        .or_default() += 1;
                    seen.first
                        .lock()
                        .unwrap()
                        .entry((endpoint.clone(), id))
                        .or_insert(now);
                    seen.types
                        .lock()
                        .unwrap()
                        .entry(endpoint.clone())
                        .or_default()
                        .insert(kind);
                    *seen
                        .seconds
                        .lock()
                        .unwrap()
                        .entry(endpoint)
                        .or_default()
                        .entry(now.duration_since(epoch).as_secs())
                        .or_default() += 1;
                    "ok"
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
}

/// Makes application `acme` with one endpoint, `name` at `url`, through
/// `relay`'s admin API, and posts it one event (`body`): the event's id.
async fn acme_event(relay: &Relay, name: &str, url: &str, body: Value) -> String {
    let app = relay.admin_url("/v1/applications/acme");
    assert_eq!(send(reqwest::Method::PUT, &app, None).await.0, 201);
    let endpoint = relay.admin_url(&format!("/v1/applications/acme/endpoints/{name}"));
    let settings = json!({ "url": url });
    assert_eq!(
        send(reqwest::Method::PUT, &endpoint, Some(settings))
            .await
            .0,
        201
    );
    let post = relay.url("/v1/applications/acme/events");
    let (status, v) = send(reqwest::Method::POST, &post, Some(body)).await;
    assert_eq!(status, 202, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// Whether `acme`'s event `id` shows its first copy in `state` on
/// `relay` within 30 s.
async fn copy_reaches(relay: &Relay, id: &str, state: &str) -> bool {
    let event = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    eventually(Duration::from_secs(30), || async {
        send(reqwest::Method::GET, &event, None).await.1["copies"][0]["state"] == state
    })
    .await
}

async fn send(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    send_with(method, url, body, &[]).await
}

/// [`send`] with `headers` too.
async fn send_with(
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut req = http().request(method, url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    match req.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// A receiver for every endpoint (by path) on a port of its own: what it
/// saw, and its address.
async fn receiver() -> (Arc<Seen>, std::net::SocketAddr) {
    let seen = Arc::new(Seen::default());
    let rx = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = rx.local_addr().unwrap();
    receive(seen.clone(), rx, Instant::now());
    (seen, addr)
}

both!(events_fan_out_survive_a_kill_and_every_copy_ends_in_one_place);
async fn events_fan_out_survive_a_kill_and_every_copy_ends_in_one_place(engine: Engine) {
    let epoch = Instant::now();
    let seen = Arc::new(Seen::default());
    let rx = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rx_addr = rx.local_addr().unwrap();
    receive(seen.clone(), rx, epoch);
    // The dead endpoint's port: free now (connection refused), served later.
    let dead_port = free_port();
    let args =
        format!("--destination seed=http://{rx_addr}/seed --retries 1 --breaker-max-cool-down 1s");
    let mut bench = Bench::start(engine, "events", &args).await;
    // The fleet's second relay: events are posted to each in turn.
    let mut other = match engine {
        Engine::Fleet => Some(bench.another("n2").await),
        Engine::Local => None,
    };
    let admin = |r: &Relay, p: &str| r.admin_url(p);
    let relay = &bench.relay;
    assert_eq!(
        send(
            reqwest::Method::PUT,
            &admin(relay, "/v1/applications/acme"),
            Some(json!({}))
        )
        .await
        .0,
        201
    );
    for (name, types, url, rate) in [
        (
            "inv",
            json!(["invoice.*"]),
            format!("http://{rx_addr}/inv"),
            None,
        ),
        (
            "paid",
            json!(["invoice.paid"]),
            format!("http://{rx_addr}/paid"),
            None,
        ),
        (
            "fragile",
            json!(null),
            format!("http://{rx_addr}/fragile"),
            Some(FRAGILE),
        ),
        (
            "dead",
            json!(["*"]),
            format!("http://127.0.0.1:{dead_port}/dead"),
            None,
        ),
    ] {
        let mut body = json!({"url": url, "event_types": types});
        if let Some(r) = rate {
            body["rate"] = json!(r);
        }
        if name == "dead" {
            // Its queue holds a second (200 copies): the rest overflow.
            body["budget"] = json!("1s");
        }
        let (status, v) = send(
            reqwest::Method::PUT,
            &admin(relay, &format!("/v1/applications/acme/endpoints/{name}")),
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "{name}: {v}");
    }

    // The fleet's other relay learns them within a poll.
    if let Some(r) = &other {
        let url = r.admin_url("/v1/applications/acme/endpoints");
        let known = eventually(Duration::from_secs(10), || async {
            let (_, v) = send(reqwest::Method::GET, &url, None).await;
            v["endpoints"].as_array().is_some_and(|e| e.len() == 4)
        })
        .await;
        assert!(known, "{:?}", send(reqwest::Method::GET, &url, None).await);
    }
    // 600 events at 100/s; the (first) relay killed after 240 and
    // started again.
    let mut posted: Vec<(String, &str, Instant)> = Vec::with_capacity(EVENTS);
    let mut ticker = tokio::time::interval(Duration::from_millis(10));
    for n in 0..EVENTS {
        ticker.tick().await;
        if n == EVENTS * 2 / 5 {
            bench.relay.kill().await;
            bench.relay = bench.another("n1").await;
        }
        let kind = TYPES[n % TYPES.len()];
        let to = match &other {
            Some(r) if n % 2 == 1 => r,
            _ => &bench.relay,
        };
        let url = to.url("/v1/applications/acme/events");
        let body = json!({"type": kind, "payload": {"n": n}});
        let id = loop {
            let r = http()
                .post(&url)
                .header("idempotency-key", format!("e{n}"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            match r {
                Ok(r) if r.status() == 202 => {
                    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
                    break v["id"].as_str().unwrap().to_owned();
                }
                other => {
                    let status = other.map(|r| r.status().as_u16()).unwrap_or(0);
                    assert!(status == 0 || status == 503, "event {n}: {status}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        posted.push((id, kind, Instant::now()));
    }
    let subscribed = |endpoint: &str| -> HashSet<String> {
        posted
            .iter()
            .filter(|(_, k, _)| match endpoint {
                "inv" => k.starts_with("invoice."),
                "paid" => *k == "invoice.paid",
                _ => true,
            })
            .map(|(id, _, _)| id.clone())
            .collect()
    };
    let relay = &bench.relay;
    let all: HashSet<String> = posted.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(
        all.len(),
        EVENTS,
        "one id per event, a retried post answered the same"
    );

    // The healthy ones get every event they subscribe to.
    for endpoint in ["inv", "paid"] {
        let want = subscribed(endpoint);
        let got = eventually(Duration::from_secs(60), || async {
            want.is_subset(&seen.got(endpoint))
        })
        .await;
        let missing = want.difference(&seen.got(endpoint)).count();
        assert!(got, "{endpoint}: {missing} of {} not received", want.len());
        assert!(
            seen.got(endpoint).is_subset(&want),
            "{endpoint} got an event it does not take"
        );
    }
    // The dead one's copies all end dead-lettered.
    let dead_letters = |endpoint: &'static str, relay_admin: String| async move {
        let mut n = 0;
        let mut cursor: Option<String> = None;
        loop {
            let url = match &cursor {
                Some(c) => format!("{relay_admin}?outcome=failed&limit=1000&cursor={c}"),
                None => format!("{relay_admin}?outcome=failed&limit=1000"),
            };
            let (status, v) = send(reqwest::Method::GET, &url, None).await;
            assert_eq!(status, 200, "{endpoint}: {v}");
            n += v["copies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["state"] == "dead_lettered")
                .count();
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return n,
            }
        }
    };
    // The dead one's copies: none delivered while it is down; what its
    // queue (1 s at 200/s) does not hold is dead-lettered at once (its
    // breaker holds the queue, probing each second).
    let dead_url = admin(relay, "/v1/applications/acme/endpoints/dead/attempts");
    let most_dead = eventually(Duration::from_secs(60), || async {
        dead_letters("dead", dead_url.clone()).await >= EVENTS / 2
    })
    .await;
    let dead_lettered = dead_letters("dead", dead_url.clone()).await;
    assert!(most_dead, "dead: {dead_lettered} of {EVENTS} dead-lettered");
    assert!(seen.got("dead").is_empty());
    // The fragile one: what it took came at its rate; the rest overflowed.
    let fragile_url = admin(relay, "/v1/applications/acme/endpoints/fragile/attempts");
    let settled = eventually(Duration::from_secs(90), || async {
        seen.got("fragile").len() + dead_letters("fragile", fragile_url.clone()).await >= EVENTS
    })
    .await;
    let overflowed = dead_letters("fragile", fragile_url.clone()).await;
    assert!(
        settled,
        "fragile: {} received, {overflowed} dead-lettered",
        seen.got("fragile").len()
    );
    assert!(overflowed > 0, "posting at 100/s overflows 40/s");

    // What each had received before the recovers.
    let before: HashMap<&str, usize> = ["inv", "paid", "fragile", "dead"]
        .into_iter()
        .map(|e| (e, seen.got(e).len()))
        .collect();

    // Back: the dead endpoint listens now; recover sends every copy again.
    let back = tokio::net::TcpListener::bind(("127.0.0.1", dead_port))
        .await
        .unwrap();
    receive(seen.clone(), back, epoch);
    let since = "2020-01-01T00:00:00Z";
    for endpoint in ["dead", "fragile"] {
        let url = admin(
            relay,
            &format!("/v1/applications/acme/endpoints/{endpoint}/recover"),
        );
        let recover = || send(reqwest::Method::POST, &url, Some(json!({"since": since})));
        let (status, v) = recover().await;
        assert_eq!(status, 202, "{endpoint}: {v}");
        // Asked again at once: every copy is on its way already, none is
        // sent twice.
        let (status, again) = recover().await;
        assert_eq!(status, 202, "{endpoint}: {again}");
        assert_eq!(again["sent"], 0, "{endpoint}: {v} then {again}");
    }
    let recovered = eventually(Duration::from_secs(120), || async {
        seen.got("dead").len() == EVENTS && seen.got("fragile").len() == EVENTS
    })
    .await;
    assert!(
        recovered,
        "after recover: dead {} and fragile {} of {EVENTS}",
        seen.got("dead").len(),
        seen.got("fragile").len()
    );

    // Never above the fragile one's rate + 1 in any second.
    let worst = seen.seconds.lock().unwrap()["fragile"]
        .values()
        .copied()
        .max()
        .unwrap_or(0);
    assert!(worst <= FRAGILE + 1, "fragile: {worst} in one second");
    // Duplicates only for deliveries in flight at the kill.
    for endpoint in ["inv", "paid", "fragile", "dead"] {
        let dups = seen.duplicates(endpoint);
        assert!(dups <= 20, "{endpoint}: {dups} duplicates");
    }
    // A copy's history: the dead one's first attempts failed, then it was
    // delivered once recovered.
    let (id, _, _) = &posted[EVENTS - 1];
    let (status, v) = send(
        reqwest::Method::GET,
        &admin(relay, &format!("/v1/applications/acme/events/{id}")),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let dead = v["copies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["endpoint"] == "dead")
        .unwrap();
    assert_eq!(dead["state"], "delivered", "{dead}");
    assert!(!dead["attempts"].as_array().unwrap().is_empty(), "{dead}");

    // 202 to receipt at the healthy endpoints, beside the fragile and dead ones.
    {
        let first = seen.first.lock().unwrap();
        let mut lat: Vec<Duration> = posted
            .iter()
            .filter(|(_, k, _)| k.starts_with("invoice."))
            .filter_map(|(id, _, at)| {
                first
                    .get(&("inv".to_owned(), id.clone()))
                    .map(|r| r.saturating_duration_since(*at))
            })
            .collect();
        lat.sort();
        let p99 = lat[lat.len() * 99 / 100];
        eprintln!(
            "events ({engine:?}): p99 202 to receipt at inv {p99:?}; fragile overflowed {overflowed}; dead dead-lettered {dead_lettered}; duplicates inv {} paid {} fragile {} dead {}",
            seen.duplicates("inv"),
            seen.duplicates("paid"),
            seen.duplicates("fragile"),
            seen.duplicates("dead")
        );
        assert!(p99 < Duration::from_secs(10), "generous: {p99:?}");
        // Per endpoint: subscribed, received before the recovers,
        // dead-lettered, recovered, duplicates.
        for (e, dead) in [
            ("inv", 0),
            ("paid", 0),
            ("fragile", overflowed),
            ("dead", dead_lettered),
        ] {
            let got = seen.got(e).len();
            eprintln!(
                "| {engine:?} | {e} | {} | {} | {dead} | {} | {} |",
                subscribed(e).len(),
                before[e],
                got - before[e],
                seen.duplicates(e)
            );
        }
    }
    for r in std::iter::once(&mut bench.relay).chain(other.as_mut()) {
        r.signal("TERM");
        assert!(r.exit(Duration::from_secs(30)).await.success());
    }
}

/// Every dead letter the relay lists (`GET /v1/dead-letters`, each page).
/// A loopback port nothing listens on now (connections to it are refused).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn dead_letters(relay: &Relay) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => relay.admin_url(&format!("/v1/dead-letters?limit=1000&cursor={c}")),
            None => relay.admin_url("/v1/dead-letters?limit=1000"),
        };
        let (status, v) = send(reqwest::Method::GET, &url, None).await;
        assert_eq!(status, 200, "{v}");
        all.extend(v["dead_letters"].as_array().cloned().unwrap_or_default());
        match v["next_cursor"].as_str() {
            Some(c) if v["more"] == true => cursor = Some(c.to_owned()),
            _ => return all,
        }
    }
}

/// Endpoints of the sweep's application, and events posted at once.
const SWEPT_ENDPOINTS: usize = 120;
const SWEPT_EVENTS: usize = 12;

/// The fleet: a relay SIGKILLed while it fans events out leaves their
/// applications noted, and another relay's sweep queues the copies it
/// left five to seven seconds later, so every endpoint receives every
/// event answered 202 (the sweep asked Redis for "all" with a count past
/// i64::MAX, was refused every time, and the copies stayed pending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_completes_a_fan_out_a_killed_relay_left() {
    let (seen, rx_addr) = receiver().await;
    let args = format!("--destination seed=http://{rx_addr}/seed");
    let mut bench = Bench::start(Engine::Fleet, "events-sweep", &args).await;
    let other = bench.another("n2").await;
    let relay = &bench.relay;
    let app = relay.admin_url("/v1/applications/wide");
    assert_eq!(send(reqwest::Method::PUT, &app, None).await.0, 201);
    for n in 0..SWEPT_ENDPOINTS {
        let url = relay.admin_url(&format!("/v1/applications/wide/endpoints/w{n}"));
        let body = json!({"url": format!("http://{rx_addr}/w{n}")});
        assert_eq!(send(reqwest::Method::PUT, &url, Some(body)).await.0, 201);
    }
    let listed = other.admin_url("/v1/applications/wide/endpoints");
    let known = eventually(Duration::from_secs(10), || async {
        let (_, v) = send(reqwest::Method::GET, &listed, None).await;
        v["endpoints"].as_array().map_or(0, Vec::len) == SWEPT_ENDPOINTS
    })
    .await;
    assert!(known, "the other relay knows every endpoint");

    // Events posted at once to the first relay, killed as soon as they
    // are all answered: their fan-outs (over a thousand copies) are under
    // way.
    let post = relay.url("/v1/applications/wide/events");
    let posts = (0..SWEPT_EVENTS).map(|n| {
        let post = post.clone();
        async move {
            let body = json!({"type": "thing.done", "payload": {"n": n}});
            send(reqwest::Method::POST, &post, Some(body)).await
        }
    });
    let answers = futures_util::future::join_all(posts).await;
    bench.relay.kill().await;
    let mut ids = HashSet::new();
    for (status, v) in answers {
        assert_eq!(status, 202, "{v}");
        ids.insert(v["id"].as_str().unwrap_or_default().to_owned());
    }
    let redis = bench.redis.as_ref().expect("the fleet's Redis");
    let left = redis.cli(&["ZCARD", "dripfeed:ev:{app:wide}:x"]);
    assert_ne!(
        left.trim(),
        "0",
        "the kill left fan-outs unfinished (else this tests nothing)"
    );

    // The other relay's sweep queues the rest.
    let all = eventually(Duration::from_secs(60), || async {
        (0..SWEPT_ENDPOINTS).all(|n| seen.got(&format!("w{n}")).is_superset(&ids))
    })
    .await;
    let short: Vec<String> = (0..SWEPT_ENDPOINTS)
        .map(|n| format!("w{n}"))
        .filter(|e| !seen.got(e).is_superset(&ids))
        .collect();
    assert!(all, "{} endpoints miss events: {short:?}", short.len());
    let left = redis.cli(&["ZCARD", "dripfeed:ev:{app:wide}:x"]);
    assert_eq!(left.trim(), "0", "no fan-out left");
    drop(other);
}

/// The fleet: an application deleted on one relay and made again at once
/// on another starts with none of the deleted one's endpoints there too,
/// and its first event reaches only its own (the second relay made it
/// from its view a poll old: the deleted endpoint took the new event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_made_again_on_another_relay_starts_with_no_endpoint() {
    let (seen, rx_addr) = receiver().await;
    let args = format!("--destination seed=http://{rx_addr}/seed");
    let bench = Bench::start(Engine::Fleet, "events-remade", &args).await;
    let (a, b) = (&bench.relay, bench.another("n2").await);
    let put = |relay: &Relay, path: &str, body: Option<Value>| {
        let url = relay.admin_url(path);
        async move { send(reqwest::Method::PUT, &url, body).await }
    };
    assert_eq!(put(a, "/v1/applications/eta", None).await.0, 201);
    let old = json!({"url": format!("http://{rx_addr}/old")});
    assert_eq!(
        put(a, "/v1/applications/eta/endpoints/old", Some(old))
            .await
            .0,
        201
    );
    // The other relay knows it; then it is deleted on the first, and at
    // once made again on the second.
    let listed = b.admin_url("/v1/applications/eta/endpoints");
    let known = eventually(Duration::from_secs(10), || async {
        let (_, v) = send(reqwest::Method::GET, &listed, None).await;
        v["endpoints"].as_array().is_some_and(|e| e.len() == 1)
    })
    .await;
    assert!(known, "the second relay knows the first endpoint");
    let gone = send(
        reqwest::Method::DELETE,
        &a.admin_url("/v1/applications/eta"),
        None,
    )
    .await;
    assert_eq!(gone.0, 200, "{}", gone.1);
    let (status, v) = put(&b, "/v1/applications/eta", None).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["endpoints"], 0, "made again with none: {v}");
    let new = json!({"url": format!("http://{rx_addr}/new")});
    assert_eq!(
        put(&b, "/v1/applications/eta/endpoints/new", Some(new))
            .await
            .0,
        201
    );
    let body = json!({"type": "thing.done", "payload": {}});
    let (status, v) = send(
        reqwest::Method::POST,
        &b.url("/v1/applications/eta/events"),
        Some(body),
    )
    .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["endpoints"], 1, "{v}");
    let id = v["id"].as_str().unwrap_or_default().to_owned();
    let arrived = eventually(Duration::from_secs(10), || async {
        seen.got("new").contains(&id)
    })
    .await;
    assert!(arrived, "the new endpoint receives it");
    assert!(
        !seen.got("old").contains(&id),
        "the deleted endpoint never does"
    );
}

/// The fleet: a recover, asked of another relay than the one that
/// dead-lettered the copies, of more copies than the endpoint's queue
/// holds once its rate was lowered, sends them as it has room: each
/// delivered once, none back in the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recover_larger_than_the_queue_waits_for_room() {
    let seen = Arc::new(Seen::default());
    let dead_port = free_port();
    let args = "--destination seed=http://127.0.0.1:9/seed --retries 1 --breaker-max-cool-down 1s";
    let bench = Bench::start(Engine::Fleet, "events-recover", args).await;
    let (a, b) = (&bench.relay, bench.another("n2").await);
    let app = a.admin_url("/v1/applications/rec");
    assert_eq!(send(reqwest::Method::PUT, &app, None).await.0, 201);
    let url = a.admin_url("/v1/applications/rec/endpoints/slow");
    let body =
        json!({"url": format!("http://127.0.0.1:{dead_port}/slow"), "rate": 10, "budget": "1s"});
    assert_eq!(send(reqwest::Method::PUT, &url, Some(body)).await.0, 201);
    let mut ids = HashSet::new();
    for n in 0..40 {
        let body = json!({"type": "thing.done", "payload": {"n": n}});
        let (status, v) = send(
            reqwest::Method::POST,
            &a.url("/v1/applications/rec/events"),
            Some(body),
        )
        .await;
        assert_eq!(status, 202, "{v}");
        ids.insert(v["id"].as_str().unwrap_or_default().to_owned());
    }
    let all_dead = eventually(Duration::from_secs(60), || async {
        dead_letters(a).await.len() == 40
    })
    .await;
    assert!(all_dead, "{} dead letters", dead_letters(a).await.len());
    // Slowed to a queue of 5 (on the first relay), the receiver comes
    // back; the other relay recovers them.
    let (status, v) = send(reqwest::Method::PATCH, &url, Some(json!({"rate": 5}))).await;
    assert_eq!(status, 200, "{v}");
    let on_b = b.admin_url("/v1/applications/rec/endpoints/slow");
    let slowed = eventually(Duration::from_secs(10), || async {
        send(reqwest::Method::GET, &on_b, None).await.1["rate"] == json!(5.0)
    })
    .await;
    assert!(
        slowed,
        "{:?}",
        send(reqwest::Method::GET, &on_b, None).await
    );
    let rx = tokio::net::TcpListener::bind(("127.0.0.1", dead_port))
        .await
        .unwrap();
    receive(seen.clone(), rx, Instant::now());
    let recover = b.admin_url("/v1/applications/rec/endpoints/slow/recover");
    let (status, v) = send(
        reqwest::Method::POST,
        &recover,
        Some(json!({"since": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!((status, &v["sent"]), (202, &json!(40)), "{v}");
    let all = eventually(Duration::from_secs(60), || async {
        seen.got("slow").is_superset(&ids)
    })
    .await;
    assert!(
        all,
        "{} of 40 delivered; dead letters {:?}",
        seen.got("slow").len(),
        dead_letters(a).await
    );
    assert_eq!(seen.duplicates("slow"), 0);
    assert!(
        dead_letters(a).await.is_empty(),
        "{:?}",
        dead_letters(a).await
    );
}

/// An application deleted and the relay killed at once, its endpoints'
/// copies still held: the next start dead-letters each copy once, with the
/// application's reason (they were `destination-deleted`: a restart sent
/// them through an endpoint's deletion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_deleted_then_killed_dead_letters_its_copies_once_with_its_reason() {
    let dead_port = free_port();
    let args = format!("--destination seed=http://127.0.0.1:{dead_port}/seed");
    let mut bench = Bench::start(Engine::Local, "events-delete-kill", &args).await;
    let relay = &bench.relay;
    let app = relay.admin_url("/v1/applications/gone");
    assert_eq!(send(reqwest::Method::PUT, &app, None).await.0, 201);
    for name in ["one", "two"] {
        let body = json!({"url": format!("http://127.0.0.1:{dead_port}/{name}"), "rate": 1, "budget": "30s"});
        let url = relay.admin_url(&format!("/v1/applications/gone/endpoints/{name}"));
        assert_eq!(send(reqwest::Method::PUT, &url, Some(body)).await.0, 201);
    }
    let post = relay.url("/v1/applications/gone/events");
    for n in 0..5 {
        let body = json!({"type": "thing.happened", "payload": {"n": n}});
        let (status, v) = send(reqwest::Method::POST, &post, Some(body)).await;
        assert_eq!((status, &v["endpoints"]), (202, &json!(2)), "{v}");
    }
    assert_eq!(send(reqwest::Method::DELETE, &app, None).await.0, 200);
    bench.relay.kill().await;
    let relay = bench.another("n1").await;
    let all = eventually(Duration::from_secs(30), || async {
        dead_letters(&relay).await.len() >= 10
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = dead_letters(&relay).await;
    assert!(all, "dead letters: {lines:?}");
    let copies: HashSet<(String, String)> = lines
        .iter()
        .map(|l| (l["id"].to_string(), l["destination"].to_string()))
        .collect();
    assert_eq!((lines.len(), copies.len()), (10, 10), "{lines:?}");
    for line in &lines {
        assert_eq!(line["reason"], "application-deleted", "{line}");
    }
}

both!(deleting_an_application_dead_letters_what_its_endpoints_held);
/// Deleting an application deletes its endpoints: new events for it are
/// 404, and what an endpoint still held (here a dead receiver's copies,
/// held by its breaker) is dead-lettered once the grace ends, each line
/// with reason `application-deleted`; an endpoint made again under that
/// name in another application does not inherit their history.
async fn deleting_an_application_dead_letters_what_its_endpoints_held(engine: Engine) {
    let dead_port = free_port();
    let args = format!("--destination seed=http://127.0.0.1:{dead_port}/seed");
    let mut bench = Bench::start(engine, "events-delete", &args).await;
    let relay = &mut bench.relay;
    let (status, _) = send(
        reqwest::Method::PUT,
        &relay.admin_url("/v1/applications/gone"),
        None,
    )
    .await;
    assert_eq!(status, 201, "an application needs no body");
    for name in ["one", "two"] {
        let body = json!({"url": format!("http://127.0.0.1:{dead_port}/{name}"), "rate": 1, "budget": "30s"});
        let url = relay.admin_url(&format!("/v1/applications/gone/endpoints/{name}"));
        assert_eq!(send(reqwest::Method::PUT, &url, Some(body)).await.0, 201);
    }
    let post = relay.url("/v1/applications/gone/events");
    // An event posted with an Idempotency-Key (what a sender retrying it
    // would send again).
    let keyed = |post: String| async move {
        let body = json!({"type": "invoice.paid", "payload": {"invoice": "in_123"}});
        let key = [("idempotency-key", "invoice-in_123-paid")];
        send_with(reqwest::Method::POST, &post, Some(body), &key).await
    };
    let mut old_id = String::new();
    for n in 0..5 {
        let (status, v) = if n == 4 {
            keyed(post.clone()).await
        } else {
            let body = json!({"type": "thing.happened", "payload": {"n": n}});
            send(reqwest::Method::POST, &post, Some(body)).await
        };
        assert_eq!(status, 202, "{v}");
        assert_eq!(v["endpoints"], 2, "{v}");
        old_id = v["id"].as_str().unwrap_or_default().to_owned();
    }
    let (status, v) = send(
        reqwest::Method::DELETE,
        &relay.admin_url("/v1/applications/gone"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let body = json!({"type": "thing.happened", "payload": {}});
    assert_eq!(send(reqwest::Method::POST, &post, Some(body)).await.0, 404);
    let url = relay.admin_url("/v1/applications/gone/endpoints/one");
    assert_eq!(send(reqwest::Method::GET, &url, None).await.0, 404);

    // Ten copies (five events, two endpoints), each in one place: the
    // dead letters, with the deletion's reason (none was delivered).
    let all = eventually(Duration::from_secs(30), || async {
        dead_letters(relay).await.len() >= 10
    })
    .await;
    let lines = dead_letters(relay).await;
    assert!(all, "dead letters: {lines:?}");
    assert_eq!(lines.len(), 10, "{lines:?}");
    for line in &lines {
        assert_eq!(line["reason"], "application-deleted", "{line}");
    }

    // Application `app` made, and its endpoint `name` made again once the
    // deleted one of that name has drained.
    let make_again = |app: &'static str, name: &'static str| {
        let app_url = relay.admin_url(&format!("/v1/applications/{app}"));
        let url = relay.admin_url(&format!("/v1/applications/{app}/endpoints/{name}"));
        let body = json!({"url": format!("http://127.0.0.1:{dead_port}/{name}")});
        async move {
            assert_eq!(send(reqwest::Method::PUT, &app_url, None).await.0, 201);
            let made = eventually(Duration::from_secs(30), || async {
                send(reqwest::Method::PUT, &url, Some(body.clone())).await.0 == 201
            })
            .await;
            assert!(made, "made again once the first has drained");
        }
    };
    // The name made again under another application: the first one's
    // history is not its own (nothing listed, nothing recovered).
    make_again("other", "one").await;
    // ...nor its counts (the fleet's went on from the deleted one's).
    let one = relay.admin_url("/v1/destinations/one");
    let live = &send(reqwest::Method::GET, &one, None).await.1["live"];
    assert_eq!(
        (&live["accepted"], &live["dead_lettered"]),
        (&json!(0), &json!(0)),
        "{live}"
    );
    let (status, v) = send(
        reqwest::Method::GET,
        &relay.admin_url("/v1/applications/other/endpoints/one/attempts"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["copies"], json!([]), "{v}");
    let (status, v) = send(
        reqwest::Method::POST,
        &relay.admin_url("/v1/applications/other/endpoints/one/recover"),
        Some(json!({"since": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["sent"], 0, "{v}");

    // The application made again under its own name starts with no
    // events: the deleted one's are not listed, shown nor recovered.
    make_again("gone", "two").await;
    let (status, v) = send(
        reqwest::Method::GET,
        &relay.admin_url("/v1/applications/gone/events"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["events"], json!([]), "{v}");
    let old = relay.admin_url(&format!("/v1/applications/gone/events/{old_id}"));
    let (status, v) = send(reqwest::Method::GET, &old, None).await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = send(
        reqwest::Method::POST,
        &relay.admin_url("/v1/applications/gone/endpoints/two/recover"),
        Some(json!({"since": "2020-01-01T00:00:00+01:00"})),
    )
    .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["sent"], 0, "{v}");
    // Its keys are its own: the deleted one's key is a new event here,
    // fanned out to the new endpoint (then a repeat of that one).
    let (status, v) = keyed(post.clone()).await;
    assert_eq!(status, 202, "{v}");
    assert_ne!(v["status"], "duplicate", "{v}");
    assert_ne!(v["id"].as_str(), Some(old_id.as_str()), "{v}");
    assert_eq!(v["endpoints"], 1, "{v}");
    let first = v["id"].clone();
    let (status, v) = keyed(post.clone()).await;
    assert_eq!(
        (status, &v["status"], &v["id"]),
        (202, &json!("duplicate"), &first),
        "{v}"
    );
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}

/// A tenant's quota is charged once per event taken: a repeat of an
/// `Idempotency-Key` (answered with the first event) is given back, so a
/// sender retrying a post does not spend its quota. A key is the
/// tenant's (another tenant's same key is another event) and names one
/// event: the key with another payload or type is refused, 422
/// `key-reused`, and nothing is taken. The 429 carries the tenant's
/// `RateLimit` fields, as a webhook's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_event_does_not_spend_the_tenants_quota() {
    let dir = TempDir::new("events-quota");
    let args = format!(
        "--destination seed=http://127.0.0.1:9/seed --data-dir {} \
         --tenant-rate 0.001 --tenant-burst 2 --tenant-header x-tenant",
        dir.arg("data")
    );
    let mut relay = Relay::start_with(&argv(&args), &[]).await;
    let url = relay.admin_url("/v1/applications/acme");
    assert_eq!(send(reqwest::Method::PUT, &url, None).await.0, 201);
    // Every listing answers a cursor it did not give alike: 422 bad-cursor.
    for listing in [
        "/v1/applications?cursor=bad!",
        "/v1/applications/acme/endpoints?cursor=bad!",
        "/v1/applications/acme/events?cursor=abc",
        "/v1/destinations?cursor=abc",
    ] {
        let (status, v) = send(reqwest::Method::GET, &relay.admin_url(listing), None).await;
        assert_eq!(
            (status, &v["type"]),
            (422, &json!("urn:dripfeed:problem:bad-cursor")),
            "{listing}: {v}"
        );
    }
    let post_as = |tenant: &'static str, key: &'static str, body: &'static str| {
        let url = relay.url("/v1/applications/acme/events");
        async move {
            let resp = http()
                .post(url)
                .header("x-tenant", tenant)
                .header("idempotency-key", key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("the relay answers");
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            (status, resp.text().await.unwrap_or_default(), headers)
        }
    };
    let event = r#"{"type": "thing.done", "payload": {}}"#;
    let post = |key: &'static str| post_as("t", key, event);
    let (status, first, _) = post("k1").await;
    assert_eq!(status, 202, "{first}");
    let first: Value = serde_json::from_str(&first).unwrap();
    for _ in 0..5 {
        let (status, body, _) = post("k1").await;
        assert_eq!(status, 202, "{body}");
        assert!(body.contains("duplicate"), "{body}");
    }
    for other in [
        r#"{"type": "thing.done", "payload": {"n": 2}}"#,
        r#"{"type": "thing.undone", "payload": {}}"#,
    ] {
        let (status, body, _) = post_as("t", "k1", other).await;
        assert_eq!(status, 422, "{body}");
        assert!(body.contains("key-reused"), "{body}");
    }
    let (status, body, _) = post_as("u", "k1", event).await;
    assert_eq!(status, 202, "{body}");
    let theirs: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(theirs["status"], "queued", "another tenant's key: {body}");
    assert_ne!(theirs["id"], first["id"]);
    assert_eq!(post("k2").await.0, 202, "the repeats were given back");
    let (status, body, headers) = post("k3").await;
    assert_eq!(status, 429, "a burst of 2: {body}");
    let field = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    assert!(field("retry-after").parse::<u64>().is_ok(), "{headers:?}");
    assert!(
        field("ratelimit-policy").starts_with(r#""key";q=2;"#),
        "{headers:?}"
    );
    assert!(
        field("ratelimit").starts_with(r#""key";r=0;t="#),
        "{headers:?}"
    );
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}

both!(a_redriven_copy_stays_its_events);
/// A dead-lettered copy redriven through the dead-letter API goes back as
/// the copy it is: its receiver sees `webhook-event-type`, and the
/// event's history says delivered.
async fn a_redriven_copy_stays_its_events(engine: Engine) {
    let seen = Arc::new(Seen::default());
    let port = free_port();
    let args = format!("--destination seed=http://127.0.0.1:{port}/seed --retries 0");
    let mut bench = Bench::start(engine, "events-redrive", &args).await;
    let relay = &mut bench.relay;
    let url = format!("http://127.0.0.1:{port}/down");
    let body = json!({"type": "order.shipped", "payload": {"order": 7}});
    let id = acme_event(relay, "down", &url, body).await;
    // Refused (nothing listens), no retry: dead-lettered, with its type.
    let event = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let dead = copy_reaches(relay, &id, "dead_lettered").await;
    assert!(dead, "{}", send(reqwest::Method::GET, &event, None).await.1);
    let (_, letters) = send(
        reqwest::Method::GET,
        &relay.admin_url("/v1/dead-letters?destination=down"),
        None,
    )
    .await;
    assert_eq!(
        letters["dead_letters"][0]["event_type"], "order.shipped",
        "{letters}"
    );
    // Its retries spent: `failed` on both engines (the fleet's said
    // `retries_exhausted`, a reason documented nowhere).
    assert_eq!(letters["dead_letters"][0]["reason"], "failed", "{letters}");

    // The receiver is up; the letter is redriven.
    let rx = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    receive(seen.clone(), rx, Instant::now());
    let (status, v) = send(
        reqwest::Method::POST,
        &relay.admin_url("/v1/dead-letters/redrive"),
        Some(json!({"ids": [id]})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let got = eventually(Duration::from_secs(30), || async {
        seen.got("down").contains(&id)
    })
    .await;
    assert!(got, "the redriven copy arrives");
    assert!(seen.types.lock().unwrap()["down"].contains("order.shipped"));
    let delivered = copy_reaches(relay, &id, "delivered").await;
    assert!(
        delivered,
        "{}",
        send(reqwest::Method::GET, &event, None).await.1
    );

    // Delivered, and sent again on request: once, whoever asks twice at
    // once (the second is told it is on its way, 409), counted on the copy.
    let resend = relay.admin_url(&format!("/v1/applications/acme/events/{id}/resend"));
    let body = json!({"endpoint": "down"});
    let (first, second) = tokio::join!(
        send(reqwest::Method::POST, &resend, Some(body.clone())),
        send(reqwest::Method::POST, &resend, Some(body.clone())),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert!(
        statuses == [202, 409] || statuses == [202, 202],
        "{first:?} {second:?}"
    );
    let twice = eventually(Duration::from_secs(30), || async {
        seen.ids
            .lock()
            .unwrap()
            .get(&("down".to_owned(), id.clone()))
            .copied()
            .unwrap_or(0)
            >= 2
    })
    .await;
    assert!(twice, "the resent copy arrives");
    let copy = eventually(Duration::from_secs(30), || async {
        let v = send(reqwest::Method::GET, &event, None).await.1;
        v["copies"][0]["state"] == "delivered" && v["copies"][0]["resent"].as_u64() >= Some(1)
    })
    .await;
    assert!(copy, "{}", send(reqwest::Method::GET, &event, None).await.1);
    // An event's view shows its payload as posted: its numbers, its keys'
    // order (it was parsed again: 1.2345678901234568e+22, keys sorted).
    let payload = r#"{"zz":1,"big":12345678901234567890123,"f":1.50}"#;
    let posted = http()
        .post(relay.url("/v1/applications/acme/events"))
        .header("content-type", "application/json")
        .body(format!(r#"{{"type":"order.paid","payload":{payload}}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    let v: Value = serde_json::from_str(&posted.text().await.unwrap()).unwrap();
    let exact = relay.admin_url(&format!(
        "/v1/applications/acme/events/{}",
        v["id"].as_str().unwrap()
    ));
    let text = http()
        .get(&exact)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(&format!(r#""payload":{payload}"#)), "{text}");
    // A listing by type that one page holds ends there: no cursor to an
    // empty page (the fleet's named one while any older event was left).
    let listing = relay.admin_url("/v1/applications/acme/events?type=order.paid&limit=1");
    let (status, page) = send(reqwest::Method::GET, &listing, None).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["events"].as_array().map(Vec::len), Some(1), "{page}");
    assert!(page["next_cursor"].is_null(), "{page}");
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}

/// A copy whose delivery hangs past the end of the shutdown grace: the
/// attempt the receiver got is kept in the copy's history (`stopped`),
/// and the next start delivers the copy again (before, the attempt went
/// unrecorded: the receiver had two POSTs, the history one attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_stopped_at_shutdown_is_in_the_copys_history() {
    let hung = Arc::new(crate::receivers::Log::default());
    let app = {
        let hung = hung.clone();
        Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
                let hung = hung.clone();
                async move {
                    hung.record(&uri, &headers, body);
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    axum::http::StatusCode::NO_CONTENT
                }
            },
        )
    };
    let rx = crate::receivers::serve(app).await;
    let dir = TempDir::new("events-stopped");
    let args = format!(
        "--data-dir {} --shutdown-grace 1s --deliver-timeout 30s",
        dir.arg("data")
    );
    let mut relay = Relay::start_with(&argv(&args), &[]).await;
    let body = json!({"type": "a.b", "payload": {}});
    let id = acme_event(&relay, "hangs", &format!("http://{rx}/hook"), body).await;
    let post = relay.url("/v1/applications/acme/events");
    let sent = eventually(Duration::from_secs(20), || async { hung.len() >= 1 }).await;
    assert!(sent, "the receiver got the attempt");
    relay.signal("TERM");
    // Stopping: an event is refused as a webhook is (once the signal is
    // taken; 0 once the listener has closed).
    let mut refused = None;
    for _ in 0..200 {
        let body = json!({"type": "a.b", "payload": {}});
        let (status, v) = send(reqwest::Method::POST, &post, Some(body)).await;
        if status != 202 {
            refused = Some((status, v));
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, v) = refused.expect("refused while stopping");
    assert!(
        (status == 503 && v["type"] == "urn:dripfeed:problem:closed") || status == 0,
        "{status} {v}"
    );
    assert!(relay.exit(Duration::from_secs(15)).await.success());

    let relay = Relay::start_with(&argv(&args), &[]).await;
    let url = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let (status, v) = send(reqwest::Method::GET, &url, None).await;
    assert_eq!(status, 200, "{v}");
    let attempts = v["copies"][0]["attempts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        attempts
            .iter()
            .any(|a| a["error"] == "stopped" && a["status"] == 0),
        "{v}"
    );
    let again = eventually(Duration::from_secs(20), || async { hung.len() >= 2 }).await;
    assert!(again, "the copy is sent again after the restart");
    drop(relay);
}

/// Over `event_retention_bytes`, the sweep deletes the oldest ended events
/// only until the store is under the bound: the newest stay, readable,
/// their `Idempotency-Key`s kept (before, one sweep deleted every ended
/// event at once: the newest was 404 and its key, posted again, fanned
/// out a second time under a new id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_its_bytes_the_store_keeps_its_newest_events() {
    let (seen, rx) = receiver().await;
    let args = format!("--destination seed=http://{rx}/seed --event-retention-bytes 100000");
    let mut bench = Bench::start(Engine::Local, "events-bytes", &args).await;
    let relay = &bench.relay;
    assert_eq!(
        send(
            reqwest::Method::PUT,
            &relay.admin_url("/v1/applications/shop"),
            None
        )
        .await
        .0,
        201
    );
    let ep = relay.admin_url("/v1/applications/shop/endpoints/ep");
    let body = json!({"url": format!("http://{rx}/ep")});
    assert_eq!(send(reqwest::Method::PUT, &ep, Some(body)).await.0, 201);
    let post = relay.url("/v1/applications/shop/events");
    let filler = "x".repeat(1000);
    let mut last = String::new();
    for n in 0..200 {
        let body = json!({"type": "thing.happened", "payload": {"n": n, "filler": filler}});
        let key = format!("k-{n}");
        let (status, v) = send_with(
            reqwest::Method::POST,
            &post,
            Some(body),
            &[("idempotency-key", &key)],
        )
        .await;
        assert_eq!(status, 202, "{v}");
        last = v["id"].as_str().unwrap_or_default().to_owned();
    }
    let delivered = eventually(Duration::from_secs(30), || async {
        seen.got("ep").len() >= 200
    })
    .await;
    assert!(delivered, "{} of 200 delivered", seen.got("ep").len());
    // A start sweeps at once.
    bench.relay.signal("TERM");
    assert!(bench.relay.exit(Duration::from_secs(15)).await.success());
    let relay = bench.another("n1").await;
    let list = relay.admin_url("/v1/applications/shop/events?limit=1000");
    let swept = eventually(Duration::from_secs(10), || async {
        send(reqwest::Method::GET, &list, None).await.1["events"]
            .as_array()
            .is_some_and(|e| e.len() < 200)
    })
    .await;
    let kept = send(reqwest::Method::GET, &list, None).await.1["events"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(swept, "the store went over its bytes: {kept} of 200 kept");
    assert!(
        kept >= 20,
        "the newest events stay, down to the bound: {kept} kept"
    );
    let newest = relay.admin_url(&format!("/v1/applications/shop/events/{last}"));
    assert_eq!(send(reqwest::Method::GET, &newest, None).await.0, 200);
    // Its key is still its.
    let body = json!({"type": "thing.happened", "payload": {"n": 199, "filler": filler}});
    let (status, v) = send_with(
        reqwest::Method::POST,
        &relay.url("/v1/applications/shop/events"),
        Some(body),
        &[("idempotency-key", "k-199")],
    )
    .await;
    assert_eq!(
        (status, v["id"].as_str()),
        (202, Some(last.as_str())),
        "{v}"
    );
}

/// A copy that failed twice before a stop (its third try an hour away)
/// makes only the attempts its round has left after the restart: the store
/// counts its attempts, and the copy sent again goes on from them, once
/// its receiver's time has come (cut to the restart's `retry_max`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_leaves_a_failing_copy_only_the_attempts_it_had_left() {
    let log = Arc::new(crate::receivers::Log::default());
    let answer = |_: &crate::receivers::Hit, tries: usize| {
        use axum::response::IntoResponse;
        let after = if tries == 2 { "3600" } else { "0" };
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", after)],
        )
            .into_response()
    };
    let rx = crate::receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let dir = TempDir::new("events-attempts");
    let args = format!(
        "--data-dir {} --shutdown-grace 2s --retries 3 --retry-min 10ms --retry-max 3600s",
        dir.arg("data")
    );
    let mut relay = Relay::start_with(&argv(&args), &[]).await;
    let body = json!({"type": "a.b", "payload": {}});
    let id = acme_event(&relay, "flaky", &format!("http://{rx}/hook"), body).await;
    assert!(log.until(Duration::from_secs(30), |h| h.len() >= 2).await);
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    assert_eq!(log.len(), 2, "its third try waits an hour");

    // Started again with a longest wait of 3 s: the copy waits for its
    // receiver's time, cut to it (sent at once before; a start takes far
    // less than the 2.7 s asked below).
    let restarted = Instant::now();
    let again = args.replace("--retry-max 3600s", "--retry-max 3s");
    let relay = Relay::start_with(&argv(&again), &[]).await;
    let url = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let ended = copy_reaches(&relay, &id, "dead_lettered").await;
    let (_, v) = send(reqwest::Method::GET, &url, None).await;
    assert!(ended, "dead-lettered after its last attempts: {v}");
    assert_eq!(log.len(), 4, "attempts 3 and 4 only after the restart: {v}");
    let third = log.hits()[2].at;
    assert!(
        third.duration_since(restarted) >= Duration::from_millis(2700),
        "the third try waited for the receiver's time: {:?}",
        third.duration_since(restarted)
    );
    let attempts = v["copies"][0]["attempts"].as_array().map_or(0, Vec::len);
    assert_eq!(attempts, 4, "{v}");
    drop(relay);
}

/// A dead-lettered copy redriven from a moved dead-letter file at a start
/// (`--redrive FILE`) goes back as the copy it is, as the API's redrive
/// sends it: its receiver sees `webhook-event-type`, and the event's
/// history says delivered (it was redriven as a plain webhook, its
/// history left dead-lettered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_redriven_from_a_file_stays_its_events() {
    let port = free_port();
    let dir = TempDir::new("events-redrive-file");
    let own = dir.join("dead.jsonl");
    let args = format!(
        "--data-dir {} --retries 0 --dead-letter-file {}",
        dir.arg("data"),
        own.display()
    );
    let mut relay = Relay::start_with(&argv(&args), &[]).await;
    let url = format!("http://127.0.0.1:{port}/down");
    let body = json!({"type": "order.shipped", "payload": {"order": 7}});
    let id = acme_event(&relay, "down", &url, body).await;
    let event = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let dead = copy_reaches(&relay, &id, "dead_lettered").await;
    assert!(dead, "{}", send(reqwest::Method::GET, &event, None).await.1);
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());

    // The file moved aside and redriven at the next start, the receiver up.
    let moved = dir.join("to-redrive.jsonl");
    std::fs::rename(&own, &moved).unwrap();
    let seen = Arc::new(Seen::default());
    let rx = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    receive(seen.clone(), rx, Instant::now());
    let again = format!("{args} --redrive {}", moved.display());
    let relay = Relay::start_with(&argv(&again), &[]).await;
    let event = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let got = eventually(Duration::from_secs(30), || async {
        seen.got("down").contains(&id)
    })
    .await;
    assert!(got, "the redriven copy arrives");
    assert!(seen.types.lock().unwrap()["down"].contains("order.shipped"));
    let delivered = copy_reaches(&relay, &id, "delivered").await;
    let (_, v) = send(reqwest::Method::GET, &event, None).await;
    assert!(delivered, "{v}");
    assert_eq!(v["copies"][0]["resent"], 1, "{v}");
    drop(relay);
}

both!(a_resend_answered_is_sent_though_the_relay_stops_at_once);
/// A resend answered 202 is sent though the relay that answered is
/// stopped as soon as it has answered, and started again: the local
/// engine's store has the copy pending, the fleet's queue has it back
/// before the answer (the task that put it back stopped with the relay,
/// and the copy, granted, read as pending for ten minutes, never sent).
async fn a_resend_answered_is_sent_though_the_relay_stops_at_once(engine: Engine) {
    let log = Arc::new(crate::receivers::Log::default());
    // The first attempt is refused for good (a 400: dead-lettered, no
    // retry); every later one is taken.
    let answer = |_: &crate::receivers::Hit, tries: usize| {
        use axum::response::IntoResponse;
        match tries {
            1 => axum::http::StatusCode::BAD_REQUEST.into_response(),
            _ => axum::http::StatusCode::OK.into_response(),
        }
    };
    let rx = crate::receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let mut bench = Bench::start(engine, "events-resend-kill", "--retries 3").await;
    let relay = &mut bench.relay;
    let body = json!({"type": "order.shipped", "payload": {}});
    let id = acme_event(relay, "down", &format!("http://{rx}/hook"), body).await;
    let event = relay.admin_url(&format!("/v1/applications/acme/events/{id}"));
    let dead = copy_reaches(relay, &id, "dead_lettered").await;
    assert!(dead, "{}", send(reqwest::Method::GET, &event, None).await.1);

    let resend = relay.admin_url(&format!("/v1/applications/acme/events/{id}/resend"));
    let (status, v) = send(
        reqwest::Method::POST,
        &resend,
        Some(json!({"endpoint": "down"})),
    )
    .await;
    relay.signal("TERM");
    assert_eq!(status, 202, "{v}");
    assert!(relay.exit(Duration::from_secs(30)).await.success());

    let again = bench.another("n1").await;
    let delivered = log.until(Duration::from_secs(30), |h| h.len() >= 2).await;
    let event = again.admin_url(&format!("/v1/applications/acme/events/{id}"));
    assert!(
        delivered,
        "sent again after the restart: {}",
        send(reqwest::Method::GET, &event, None).await.1
    );
    drop(again);
}
