//! The status page on the admin listener, in a real browser (Debian's
//! headless Chromium, required under CI): it shows each destination with
//! the depth and capacity `/metrics` gives, and follows the depth when it
//! changes, polling `GET /v1/status` (a page that does not poll fails:
//! its `data-polls` stays 0). With an admin token, a sign-in form sets an
//! `HttpOnly; SameSite=Strict` cookie checked as the token is, and a
//! change sent from another origin is refused.

use std::time::Duration;

use crate::harness::{Relay, digest, http};
use crate::receivers;

/// The DOM Chromium renders for `url` after its scripts ran for a few
/// seconds of virtual time; `None` without Chromium outside CI.
async fn rendered(url: &str) -> Option<String> {
    let run = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ])
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(Ok(out)) => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(Err(e)) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("chromium not found ({e}); skipping the browser test outside CI");
            None
        }
        Ok(Err(e)) => panic!("chromium is required in CI: {e}"),
        Err(_) => panic!("chromium did not finish within a minute"),
    }
}

/// The text of the element `data-k="{key}"` in the card of `destination`.
fn field(dom: &str, destination: &str, key: &str) -> Option<String> {
    let card = dom.split(&format!("data-name=\"{destination}\"")).nth(1)?;
    let card = card.split("<section").next()?;
    let after = card.split(&format!("data-k=\"{key}\">")).nth(1)?;
    Some(after.split('<').next()?.to_owned())
}

/// How many times the page polled.
fn polls(dom: &str) -> u64 {
    dom.split("data-polls=\"")
        .nth(1)
        .and_then(|r| r.split('"').next()?.parse().ok())
        .unwrap_or(0)
}

/// `leaky_bucket_queue_depth` and `_capacity` of `destination`, once two
/// reads a moment apart agree (the drain publishes them on its ticks).
async fn settled(relay: &Relay, destination: &str) -> (u64, u64) {
    let read = || async {
        let m = relay.metrics().await;
        let get = |name| m.get(name, &[("destination", destination)]) as u64;
        (
            get("leaky_bucket_queue_depth"),
            get("leaky_bucket_queue_capacity"),
        )
    };
    let mut last = read().await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = read().await;
        if now == last && now.1 > 0 {
            return now;
        }
        last = now;
    }
    panic!("the metrics of {destination} never settled: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_queue_as_metrics_do_and_follows_it() {
    // A receiver that never answers: one delivery hangs in flight, the
    // rest wait in the queue.
    let rx = receivers::dead().await;
    let relay = Relay::start(&format!(
        "--destination slow=http://{rx}/s --no-journal --max-in-flight 1 \
         --deliver-timeout 120s --retries 0 --latency-budget 1s --drain-rate 50"
    ))
    .await;
    let post = |n: u64| relay.post_for("slow", n);
    for n in 0..5 {
        assert_eq!(post(n).await.0, 202);
    }
    let (depth, capacity) = settled(&relay, "slow").await;
    assert_eq!(capacity, 50, "budget × rate");
    let Some(dom) = rendered(&relay.admin_url("/")).await else {
        return;
    };
    assert_eq!(
        field(&dom, "slow", "depth"),
        Some(depth.to_string()),
        "{dom}"
    );
    assert_eq!(field(&dom, "slow", "capacity"), Some(capacity.to_string()));
    assert!(polls(&dom) >= 2, "the page polled: {dom}");
    assert!(dom.contains("updated "), "its script ran");

    for n in 5..12 {
        assert_eq!(post(n).await.0, 202);
    }
    let (deeper, _) = settled(&relay, "slow").await;
    assert_eq!(deeper, depth + 7);
    let dom = rendered(&relay.admin_url("/")).await.unwrap_or_default();
    assert_eq!(
        field(&dom, "slow", "depth"),
        Some(deeper.to_string()),
        "{dom}"
    );
    assert!(polls(&dom) >= 2);
    // The page is small and carries no third-party reference.
    let page = http()
        .get(relay.admin_url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.len() < 100 * 1024, "{} bytes", page.len());
    assert!(!page.contains("https://"), "no CDN");
    // Without an admin token, a page of another site whose name resolves
    // here (DNS rebinding) gets nothing.
    for path in ["/", "/v1/status"] {
        let rebound = http()
            .get(relay.admin_url(path))
            .header("host", "evil.example:8090")
            .send()
            .await
            .unwrap();
        assert_eq!(rebound.status(), 403, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_page_signs_in_with_a_cookie_and_refuses_other_origins() {
    let log = std::sync::Arc::new(receivers::Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let relay = Relay::start(&format!(
        "--destination a=http://{rx}/a --no-journal --admin-token-sha256 {}",
        digest("admin secret")
    ))
    .await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let own = relay.admin_url("");
    let page = http().get(relay.admin_url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    assert!(
        text.contains("Sign in") && !text.contains("data-name=\"a\""),
        "{text}"
    );
    let sign_in = |token: &str, origin: &str| {
        no_redirects
            .post(relay.admin_url("/sign-in"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", origin.to_owned())
            .body(format!("token={}", token.replace(' ', "+")))
            .send()
    };
    assert_eq!(sign_in("guess", &own).await.unwrap().status(), 401);
    assert_eq!(
        sign_in("admin secret", "http://evil.example")
            .await
            .unwrap()
            .status(),
        403
    );
    let signed = sign_in("admin secret", &own).await.unwrap();
    assert_eq!(signed.status(), 303);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let token_hex: String = b"admin secret".iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        !cookie.contains(&token_hex),
        "the cookie is not the token: {cookie}"
    );
    let get = |path: &str, cookie: Option<&str>| {
        let mut req = http().get(relay.admin_url(path));
        if let Some(c) = cookie {
            req = req.header("cookie", c.to_owned());
        }
        req.send()
    };
    let page = get("/", Some(&cookie)).await.unwrap().text().await.unwrap();
    assert!(page.contains("data-name=\"a\""), "{page}");
    assert_eq!(get("/v1/status", None).await.unwrap().status(), 401);
    let status = get("/v1/status", Some(&cookie)).await.unwrap();
    assert_eq!(status.status(), 200);
    let status: serde_json::Value = serde_json::from_str(&status.text().await.unwrap()).unwrap();
    assert_eq!(status["destinations"][0]["name"], "a");
    assert_eq!(status["ready"], true);
    // The redrive button's call: from the page's origin, taken; from
    // another, refused even with the cookie.
    let redrive = |origin: &str| {
        http()
            .post(relay.admin_url("/v1/dead-letters/redrive"))
            .header("cookie", cookie.clone())
            .header("origin", origin.to_owned())
            .header("content-type", "application/json")
            .body(r#"{"destination":"a"}"#)
            .send()
    };
    assert_eq!(redrive("http://evil.example").await.unwrap().status(), 403);
    assert_eq!(redrive(&own).await.unwrap().status(), 200);
    // The bearer token still works; the cookie of another token does not.
    let other = "dripfeed_admin_0=6775657373"; // "guess"
    assert_eq!(get("/v1/status", Some(other)).await.unwrap().status(), 401);
    let bearer = http()
        .get(relay.admin_url("/v1/status"))
        .bearer_auth("admin secret")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200);
}

/// With more destinations than the page shows (50), `GET /v1/status` and
/// the page show the busiest (those holding webhooks first) and find any
/// one by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_many_destinations_the_page_shows_the_busiest_and_finds_any() {
    // A receiver that never answers within the test: what is sent is held.
    let rx = receivers::ok(
        std::sync::Arc::new(receivers::Log::default()),
        Duration::from_secs(60),
    )
    .await;
    let dir = crate::harness::TempDir::new("page-many");
    let relay = Relay::start(&format!(
        "--destination seed=http://{rx}/seed --data-dir {} --max-in-flight 1",
        dir.arg("data")
    ))
    .await;
    for i in 0..80 {
        let url = relay.admin_url(&format!("/v1/destinations/d{i}"));
        let body = format!("{{\"url\": \"http://{rx}/d{i}\", \"rate\": 1}}");
        let resp = http()
            .put(url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
    }
    for _ in 0..2 {
        assert_eq!(relay.post_for("d77", 1).await.0, 202);
    }
    let status = |query: &'static str| {
        let url = relay.admin_url(&format!("/v1/status{query}"));
        async move {
            let text = http().get(url).send().await.unwrap().text().await.unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        }
    };
    let busiest = status("").await;
    assert_eq!(busiest["held"], 81, "{busiest}");
    assert_eq!(busiest["shown"], "busiest");
    let shown = busiest["destinations"].as_array().unwrap();
    assert!(shown.len() <= 50);
    assert_eq!(shown[0]["name"], "d77", "the one holding webhooks first");

    let found = status("?find=d7").await;
    assert_eq!(found["shown"], "found");
    let names: Vec<&str> = found["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 11, "d7 and d70 to d79: {names:?}");
    assert!(names.iter().all(|n| n.contains("d7")));

    let page = http()
        .get(relay.admin_url("/?find=d42"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("data-name=\"d42\""), "the page finds it");
    assert!(page.contains("1 found of 81"), "{page}");
}
