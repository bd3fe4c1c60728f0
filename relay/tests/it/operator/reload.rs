//! SIGHUP reloads the configuration: a key added to the file is answered
//! 202 by the same process while webhooks flow, with nothing lost; a
//! destination added to the file takes webhooks; a file that does not
//! check changes nothing and is counted `refused`; a setting that needs a
//! restart is logged and left as it runs. (Before, SIGHUP ended the relay
//! at once, exit 129, without draining.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::contract::{get_json, receiver};
use crate::harness::{Relay, TempDir, digest, eventually, http};
use crate::receivers::Log;

/// A config file with `tenants` (name, key) and `destinations` (name, url).
fn config(tenants: &[(&str, &str)], destinations: &[(&str, String)], extra: &str) -> String {
    let mut text = format!("{extra}\n");
    for (name, url) in destinations {
        text.push_str(&format!(
            "[[destinations]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        ));
    }
    for (name, key) in tenants {
        text.push_str(&format!(
            "[[tenants]]\nname = \"{name}\"\n[[tenants.keys]]\nsha256 = \"{}\"\n",
            digest(key)
        ));
    }
    text
}

/// POSTs one webhook to `url` for `destination` with `key`: the status.
async fn post(url: &str, key: &str, destination: &str, n: u64) -> u16 {
    http()
        .post(url)
        .bearer_auth(key)
        .header("x-destination", destination)
        .header("content-type", "application/json")
        .body(format!("{{\"n\":{n}}}"))
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

/// Reloads `relay` counted with `result` (`applied`, `refused`).
async fn reloads(relay: &Relay, result: &str) -> f64 {
    relay
        .metrics()
        .await
        .get("dripfeed_relay_reloads_total", &[("result", result)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_added_on_sighup_is_answered_by_the_same_process_and_nothing_is_lost() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let dir = TempDir::new("reload");
    let file = dir.join("relay.toml");
    let a = vec![("a", format!("http://{rx}/a"))];
    std::fs::write(&file, config(&[("acme", "key-acme")], &a, "")).unwrap();
    let relay = Relay::start(&format!(
        "--config {} --journal-dir {} --dead-letter-file {} --drain-rate 1000",
        file.display(),
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl")
    ))
    .await;
    let pid = relay.pid();
    let url = relay.url("/v1/webhooks/deliver");
    assert_eq!(post(&url, "key-globex", "a", 0).await, 401, "not a key yet");

    // Webhooks flow under the first key while the file changes.
    let flowing = Arc::new(AtomicBool::new(true));
    let (sent, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let sender = {
        let (url, flowing, sent, refused) =
            (url.clone(), flowing.clone(), sent.clone(), refused.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while flowing.load(Ordering::Relaxed) && n < 2000 {
                n += 1;
                match post(&url, "key-acme", "a", n).await {
                    202 => sent.fetch_add(1, Ordering::Relaxed),
                    _ => refused.fetch_add(1, Ordering::Relaxed),
                };
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let both = vec![
        ("a", format!("http://{rx}/a")),
        ("b", format!("http://{rx}/b")),
    ];
    std::fs::write(
        &file,
        config(
            &[("acme", "key-acme"), ("globex", "key-globex")],
            &both,
            "max_connections = 77",
        ),
    )
    .unwrap();
    let hup = || {
        let status = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    hup();
    // The new key and the new destination, on the same process.
    let reloaded = eventually(Duration::from_secs(20), || async {
        post(&url, "key-globex", "b", 1).await == 202
    })
    .await;
    assert!(reloaded, "the new key is answered 202 after SIGHUP");
    flowing.store(false, Ordering::Relaxed);
    sender.await.unwrap();
    assert_eq!(relay.pid(), pid, "the same process");
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "no webhook refused meanwhile"
    );
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 0);
    let metrics = relay.metrics().await;
    assert_eq!(
        metrics.get("dripfeed_relay_reloads_total", &[("result", "applied")]),
        1.0
    );
    let warned = relay
        .err
        .find(Duration::from_secs(5), |l| {
            l.contains("needs a restart") && l.contains("max_connections")
        })
        .await;
    assert!(warned.is_some(), "{:?}", relay.err.all());

    // A file that does not check: nothing changes, and it is counted.
    let both_again = config(
        &[("acme", "key-acme"), ("globex", "key-globex")],
        &both,
        "deliver_timeout = \"0s\"",
    );
    std::fs::write(&file, both_again).unwrap();
    hup();
    let counted = eventually(Duration::from_secs(20), || async {
        reloads(&relay, "refused").await == 1.0
    })
    .await;
    assert!(
        counted,
        "a refused reload is counted: {:?}",
        relay.err.all()
    );
    assert!(
        relay
            .err
            .all()
            .iter()
            .any(|l| l.contains("reload refused") && l.contains("deliver_timeout")),
        "each error is logged"
    );
    assert_eq!(post(&url, "key-globex", "b", 2).await, 202, "as it was");

    // Every webhook answered 202 arrives: nothing lost to the reloads.
    let all = eventually(Duration::from_secs(30), || async {
        log.len() as u64 >= sent + 2
    })
    .await;
    assert!(all, "{} of {} arrived", log.len(), sent + 2);
    assert_eq!(log.keys().len() as u64, sent + 2, "each once");
}

/// A reload is all or nothing, counted as what it was. A file that adds
/// a key and raises an active destination's ceiling past what its ring
/// holds is refused whole (the key too), counted `refused`, and the same
/// file reloaded again is checked again (refused while the destination is
/// active, applied once it is idle). Before, the key was applied, the
/// reload counted `applied`, the rate never changed, and the next reload
/// of the same file saw nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_the_queue_refuses_changes_nothing_and_is_checked_again() {
    let log = Arc::new(Log::default());
    // Slow: webhooks stay in flight, the destination active, for seconds.
    let rx = receiver(log.clone(), 204, Duration::from_secs(3)).await;
    let dir = TempDir::new("reload-whole");
    let file = dir.join("relay.toml");
    let d = |rate: u32, ceiling: u32| {
        format!(
            "[[destinations]]\nname = \"d\"\nurl = \"http://{rx}/d\"\nrate = {rate}\n\
             ceiling = {ceiling}\nbudget = \"1s\"\n"
        )
    };
    let tenants = |keys: &[&str]| {
        let mut t = "[[tenants]]\nname = \"acme\"\n".to_owned();
        for k in keys {
            t.push_str(&format!("[[tenants.keys]]\nsha256 = \"{}\"\n", digest(k)));
        }
        t
    };
    std::fs::write(&file, format!("{}{}", d(5, 10), tenants(&["key-a"]))).unwrap();
    let relay = Relay::start(&format!(
        "--config {} --journal-dir {} --dead-letter-file {}",
        file.display(),
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl")
    ))
    .await;
    let url = relay.url("/v1/webhooks/deliver");
    for n in 0..4 {
        assert_eq!(post(&url, "key-a", "d", n).await, 202);
    }
    // A new key, and a ceiling ten times what d's ring was sized for.
    std::fs::write(
        &file,
        format!("{}{}", d(50, 100), tenants(&["key-a", "key-b"])),
    )
    .unwrap();
    for round in 1..=2 {
        relay.signal("HUP");
        let counted = eventually(Duration::from_secs(10), || async {
            reloads(&relay, "refused").await == f64::from(round)
        })
        .await;
        assert!(
            counted,
            "reload {round} refused and counted: {:?}",
            relay.err.all()
        );
        assert_eq!(reloads(&relay, "applied").await, 0.0);
        assert_eq!(
            post(&url, "key-b", "d", 100).await,
            401,
            "the key is not applied either"
        );
    }
    assert!(
        relay
            .err
            .all()
            .iter()
            .any(|l| l.contains("reload refused") && l.contains("d:") && l.contains("ring")),
        "the refusal names the destination and why: {:?}",
        relay.err.all()
    );
    // Once d has delivered and gone idle, the same file applies.
    let delivered = log
        .until(Duration::from_secs(30), |hits| hits.len() >= 4)
        .await;
    assert!(delivered);
    let applied = eventually(Duration::from_secs(30), || async {
        relay.signal("HUP");
        tokio::time::sleep(Duration::from_millis(300)).await;
        reloads(&relay, "applied").await == 1.0
    })
    .await;
    assert!(applied, "applied once d is idle: {:?}", relay.err.all());
    assert_eq!(post(&url, "key-b", "d", 101).await, 202);
    let text = http()
        .get(relay.admin_url("/v1/destinations/d"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(v["rate"], 50.0, "{v}");
}

/// An endpoint's application is fixed once set, by a reload as by the
/// admin API: a file that moves an endpoint to another application is
/// refused whole, naming it (a reload moved it, its history left behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_moves_an_endpoint_to_another_application_is_refused() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let dir = TempDir::new("reload-app");
    let file = dir.join("relay.toml");
    let text = |app: &str| {
        format!(
            "[[destinations]]\nname = \"hook\"\nurl = \"http://{rx}/hook\"\napplication = \"{app}\"\n"
        )
    };
    std::fs::write(&file, text("acme")).unwrap();
    let relay = Relay::start(&format!(
        "--config {} --journal-dir {} --dead-letter-file {}",
        file.display(),
        dir.arg("journal"),
        dir.arg("dead-letter.jsonl")
    ))
    .await;
    std::fs::write(&file, text("globex")).unwrap();
    relay.signal("HUP");
    let refused = eventually(Duration::from_secs(10), || async {
        reloads(&relay, "refused").await == 1.0
    })
    .await;
    assert!(refused, "{:?}", relay.err.all());
    assert!(
        relay
            .err
            .all()
            .iter()
            .any(|l| l.contains("hook:") && l.contains("application cannot change")),
        "{:?}",
        relay.err.all()
    );
    let v = get_json(&relay.admin_url("/v1/destinations/hook")).await;
    assert_eq!(v["application"], "acme", "{v}");
}
