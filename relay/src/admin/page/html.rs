//! The status page's HTML, rendered with the numbers in it (readable
//! without JavaScript); `page.js` then polls `GET /v1/status` each second,
//! updates every `data-k` field and the bars, and draws each destination's
//! last minutes (depth, rate, p99) from what it polled.

use std::fmt::Write;

use super::view::{DestinationStatus, StatusPage};

/// The page's style.
const CSS: &str = include_str!("page.css");
/// The page's script.
const JS: &str = include_str!("page.js");

/// `text` safe inside HTML text and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What the page shows, said above the cards.
fn shown_note(now: &StatusPage) -> String {
    let n = now.destinations.len();
    match now.shown {
        "found" => format!("{n} found of {} destinations (at most 50)", now.held),
        "busiest" => format!(
            "{n} of {} destinations: the busiest (most webhooks held) first; find any one by name",
            now.held
        ),
        _ => format!("{} destinations", now.held),
    }
}

/// A whole page around `body`.
fn page(title: &str, body: &str, script: bool) -> String {
    let js = if script {
        format!("<script>{JS}</script>")
    } else {
        String::new()
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{CSS}</style></head>\
         <body data-polls=\"0\">{body}{js}</body></html>\n"
    )
}

/// The sign-in form (`failed`: the token given was not the admin token).
pub(super) fn sign_in(failed: bool) -> String {
    let note = if failed {
        "<p class=\"bad\">That is not the admin token.</p>"
    } else {
        ""
    };
    let body = format!(
        "<main class=\"sign-in\"><h1>dripfeed relay</h1>{note}\
         <form method=\"post\" action=\"/sign-in\">\
         <label>Admin token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label>\
         <button>Sign in</button></form>\
         <p class=\"hint\">The token whose SHA-256 is admin_token_sha256. The browser keeps an HttpOnly session cookie derived from it (not the token), valid until the relay restarts or the token changes.</p></main>"
    );
    page("dripfeed relay: sign in", &body, false)
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), num)
}

/// One destination's card.
fn card(out: &mut String, d: &DestinationStatus) {
    let name = escape(&d.name);
    let full = match d.capacity {
        0 => 0.0,
        c => (d.depth as f64 / c as f64 * 100.0).min(100.0),
    };
    let error = d.last_error.as_ref().map_or_else(
        || "none".to_owned(),
        |e| format!("{}: {}", e.kind, escape(&e.message)),
    );
    let bounds = match (d.floor, d.ceiling) {
        (Some(f), Some(c)) => format!(" (AIMD {}–{})", num(f), num(c)),
        _ => String::new(),
    };
    let _ = write!(
        out,
        "<section class=\"dest\" data-name=\"{name}\">\
         <h2>{name} <span class=\"breaker\" data-k=\"breaker\">{breaker}</span></h2>\
         <div class=\"bar\" title=\"depth against capacity\"><div class=\"fill\" style=\"width:{full:.1}%\"></div></div>\
         <p class=\"depth\">depth <b data-k=\"depth\">{depth}</b> / capacity <b data-k=\"capacity\">{capacity}</b></p>\
         <dl>\
         <dt>rate in force</dt><dd><span data-k=\"rate_now\">{rate_now}</span>/s of <span data-k=\"rate\">{rate}</span>/s{bounds}</dd>\
         <dt>p99</dt><dd><span data-k=\"p99_ms\">{p99}</span> ms (target <span data-k=\"target_p99_ms\">{target}</span> ms)</dd>\
         <dt>in flight</dt><dd data-k=\"in_flight\">{in_flight}</dd>\
         <dt>accepted</dt><dd data-k=\"accepted\">{accepted}</dd>\
         <dt>refused</dt><dd data-k=\"refused\">{refused}</dd>\
         <dt>delivered</dt><dd data-k=\"delivered\">{delivered}</dd>\
         <dt>dead-lettered</dt><dd><span data-k=\"dead_lettered\">{dead}</span> \
         <button class=\"redrive\" data-redrive=\"{name}\">Redrive</button> <span class=\"said\"></span></dd>\
         <dt>last error</dt><dd class=\"error\" data-k=\"last_error\">{error}</dd>\
         </dl>\
         <svg class=\"chart\" viewBox=\"0 0 300 60\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"last minutes\">\
         <polyline class=\"depth\" points=\"\"/><polyline class=\"rate\" points=\"\"/><polyline class=\"p99\" points=\"\"/></svg>\
         <p class=\"legend\"><i class=\"depth\"></i>depth <i class=\"rate\"></i>rate <i class=\"p99\"></i>p99, last minutes</p>\
         </section>",
        breaker = escape(&d.breaker),
        depth = d.depth,
        capacity = d.capacity,
        rate_now = num(d.rate_now),
        rate = num(d.rate),
        p99 = opt(d.p99_ms),
        target = opt(d.target_p99_ms),
        in_flight = d.in_flight,
        accepted = d.accepted,
        refused = d.refused,
        delivered = d.delivered,
        dead = d.dead_lettered,
    );
}

/// The status page of `now` (`find`: the search that picked them).
pub(super) fn status(now: &StatusPage, find: Option<&str>) -> String {
    let mut body = String::new();
    let ready = match now.ready {
        true => "ready".to_owned(),
        false => format!(
            "not ready: {}",
            now.down
                .iter()
                .map(|d| escape(&format!("{} ({})", d.name, d.detail)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let _ = write!(
        body,
        "<header><h1>dripfeed relay</h1><p><span class=\"ready\" data-ready=\"{}\" id=\"ready\">{ready}</span> · \
         queue <b>{}</b> · <span id=\"updated\">rendered by the relay</span></p>\
         <form class=\"find\" method=\"get\" action=\"/\"><input name=\"find\" value=\"{}\" \
         placeholder=\"find a destination by name\" aria-label=\"find a destination by name\"> \
         <button>Find</button></form><p class=\"shown\" id=\"shown\">{}</p></header><main>",
        now.ready,
        now.queue,
        escape(find.unwrap_or("")),
        shown_note(now),
    );
    for d in &now.destinations {
        card(&mut body, d);
    }
    body.push_str("</main>");
    page("dripfeed relay", &body, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn the_numbers_are_in_the_page_without_script() {
        let d = DestinationStatus {
            name: "billing".into(),
            depth: 12,
            capacity: 400,
            rate: 200.0,
            rate_now: 150.5,
            adaptive: true,
            floor: Some(20.0),
            ceiling: Some(400.0),
            p99_ms: Some(42.0),
            target_p99_ms: Some(150.0),
            in_flight: 3,
            breaker: "closed".into(),
            accepted: 100,
            refused: 1,
            delivered: 87,
            dead_lettered: 0,
            last_error: None,
        };
        let html = status(
            &StatusPage {
                queue: "local",
                ready: true,
                held: 1,
                shown: "all",
                down: Vec::new(),
                destinations: vec![d],
            },
            None,
        );
        for want in [
            "data-name=\"billing\"",
            "data-k=\"depth\">12<",
            "data-k=\"capacity\">400<",
            "data-k=\"rate_now\">150.5<",
            "(AIMD 20–400)",
            "width:3.0%",
        ] {
            assert!(html.contains(want), "{want}");
        }
        assert!(html.len() < 100 * 1024, "{} bytes", html.len());
    }
}
