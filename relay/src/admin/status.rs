//! The status line, once a second: depth, rate, p99, deliveries and every
//! kind of refusal. With one destination it is one line (redrawn in place
//! on a terminal); with several, a line per destination follows. The
//! destinations' state comes from the queue (with `queue = redis`, the
//! fleet's depth and counts).
//!
//! Printed only where someone watches (a terminal, or `--status-line`); under a service manager the same summary is logged at
//! INFO once a minute instead, so a journal is not filled with a line a
//! second.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::deliver::latency::Latencies;
use crate::domain::schemas::Live;
use crate::intake::{Answers, Intake};

/// Destinations a status shows each: all of them up to this many, else
/// the busiest this many (asking each for its live state costs the fleet's
/// engine two round trips to Redis: every destination, every second, does
/// not hold at 100,000).
const SHOWN: usize = 32;

/// The live state of every held destination, or, past [`SHOWN`], of the
/// busiest; and how many are held.
async fn all_live(intake: &Intake) -> (Vec<(String, Live)>, usize) {
    let held = intake.catalog.held();
    let (_, listed) =
        crate::admin::page::view::shown(intake.queue.as_ref(), &intake.catalog, SHOWN);
    let names = listed.into_iter().map(|l| l.dest.name);
    let mut out = Vec::new();
    for name in names {
        if let Some(live) = intake.queue.live(&name).await {
            out.push((name, live));
        }
    }
    (out, held)
}

/// The summary line of `all` (of `held` destinations: past [`SHOWN`], the
/// busiest, and the line says so).
fn line(intake: &Intake, latencies: &Latencies, (all, held): (&[(String, Live)], usize)) -> String {
    let (depth, capacity, rate, delivered, dead) =
        all.iter().fold((0, 0, 0.0, 0, 0), |t, (_, s)| {
            (
                t.0 + s.depth,
                t.1 + s.capacity,
                t.2 + if s.active { s.rate_now } else { 0.0 },
                t.3 + s.delivered,
                t.4 + s.dead_lettered,
            )
        });
    let a = &intake.answers;
    let p99 = latencies.take_p99();
    let of = match held > all.len() {
        true => format!("{} (the busiest) of {held} destinations: ", all.len()),
        false => String::new(),
    };
    format!(
        "{of}depth {:>5}/{:<5} ({:>6} KiB) rate {:>6.1}/s p99 {:>7} delivered {:>7} | 503 full {} bytes {} store {} journal {} dead-letter {} | 429 {} | 413 {} | 401 {} | 403 {} | dead-lettered {}",
        depth,
        capacity,
        intake.budget.held() / 1024,
        rate,
        p99.map_or("-".into(), |p| format!("{:.1}ms", p.as_secs_f64() * 1000.0)),
        delivered,
        Answers::get(&a.full_503),
        Answers::get(&a.bytes_503),
        Answers::get(&a.store_503),
        Answers::get(&a.journal_503),
        Answers::get(&a.dead_letter_503),
        Answers::get(&a.quota_429),
        Answers::get(&a.too_large_413),
        Answers::get(&a.unauthorized_401),
        Answers::get(&a.forbidden_403),
        dead,
    )
}

/// One line per destination of `all`.
fn destination_lines(all: &[(String, Live)]) -> Vec<String> {
    all.iter()
        .map(|(name, s)| {
            format!(
                "  {:<12} depth {:>5}/{:<5} rate {:>6.1}/s in flight {:>3} accepted {:>7} delivered {:>7} refused {:>6} dead-lettered {:>5} breaker {}",
                name,
                s.depth,
                s.capacity,
                s.rate_now,
                s.in_flight,
                s.accepted,
                s.delivered,
                s.refused,
                s.dead_lettered,
                s.breaker,
            )
        })
        .collect()
}

/// Where the status goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Show {
    /// The status line on stdout each second.
    Line,
    /// A summary logged at INFO once a minute.
    Log,
}

impl Show {
    /// `status_line` when given, else the line on a terminal and the log
    /// otherwise.
    pub(crate) fn choose(given: Option<bool>) -> Show {
        match given.unwrap_or_else(|| std::io::stdout().is_terminal()) {
            true => Show::Line,
            false => Show::Log,
        }
    }
}

/// How often the summary is logged with [`Show::Log`].
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Shows the status ([`Show`]) until the task is dropped.
pub(crate) fn spawn(
    intake: Arc<Intake>,
    latencies: Arc<Latencies>,
    show: Show,
) -> tokio::task::JoinHandle<()> {
    match show {
        Show::Line => lines(intake, latencies),
        Show::Log => tokio::spawn(async move {
            let mut tick = tokio::time::interval(LOG_EVERY);
            tick.tick().await;
            loop {
                tick.tick().await;
                let (all, held) = all_live(&intake).await;
                let summary = line(&intake, &latencies, (&all, held));
                tracing::info!(destinations = held, "status: {}", squeeze(&summary));
            }
        }),
    }
}

/// `line` with the runs of padding spaces made one.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Prints the status each second until the task is dropped.
fn lines(intake: Arc<Intake>, latencies: Arc<Latencies>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let tty = std::io::stdout().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            let (all, held) = all_live(&intake).await;
            let summary = line(&intake, &latencies, (&all, held));
            let mut out = std::io::stdout().lock();
            if all.len() > 1 {
                // A line per destination: no redraw in place.
                let _ = writeln!(out, "{summary}");
                for l in destination_lines(&all) {
                    let _ = writeln!(out, "{l}");
                }
            } else if tty {
                let _ = write!(out, "\r\x1b[2K{summary}");
                let _ = out.flush();
            } else {
                let _ = writeln!(out, "{summary}");
            }
        }
    })
}
