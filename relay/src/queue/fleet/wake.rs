//! Drains that sleep and wake. A destination's drain on a relay ends once
//! it has been quiet for [`SLEEP_AFTER`](super::drain::SLEEP_AFTER) with
//! its queue empty fleet-wide
//! (an idle destination then costs this relay no task, no timer, no Redis
//! call); it starts again when work comes:
//!
//! - an admission on this relay (a webhook, an event's copy, a redrive)
//!   wakes its drain here at once ([`Shared::admitted`]);
//! - the relay that admitted tells the fleet, at most once a second per
//!   destination, on one Redis stream (`dripfeed:wake`) every relay reads
//!   every [`POLL`] ([`listen`]): the other relays' drains wake within it;
//! - every [`SCAN_EVERY`] (and at start) each relay reads the depth of the
//!   destinations whose drain sleeps here and wakes those with work (a
//!   message lost with a Redis restart, a relay that died holding
//!   webhooks).

use std::collections::HashMap;
use std::sync::Weak;
use std::time::{Duration, Instant};

use redis::Value;

use super::redis::{CALL, array, bounded, text};
use super::shared::Shared;
use crate::util::mutex::lock;

/// The stream admissions are told on.
const STREAM: &str = "dripfeed:wake";
/// About how many messages the stream keeps.
const KEPT: u64 = 10_000;
/// How often a relay tells the fleet of admissions to one destination, at
/// most.
const TELL_EVERY: Duration = Duration::from_secs(1);
/// How often each relay reads the stream.
const POLL: Duration = Duration::from_millis(250);
/// How often each relay reads the depth of its sleeping destinations.
const SCAN_EVERY: Duration = Duration::from_secs(30);

/// When this relay last told the fleet of an admission, by destination.
#[derive(Default)]
pub(crate) struct Told(std::sync::Mutex<HashMap<String, Instant>>);

impl Shared {
    /// After an admission to `name` on this relay: its drain here woken,
    /// and the fleet told (at most once a [`TELL_EVERY`]).
    pub(crate) fn admitted(&self, name: &str) {
        self.wake(name);
        let now = Instant::now();
        {
            let mut told = lock(&self.told.0);
            if told
                .get(name)
                .is_some_and(|at| now.duration_since(*at) < TELL_EVERY)
            {
                return;
            }
            if told.len() >= 4 * KEPT as usize {
                told.retain(|_, at| now.duration_since(*at) < TELL_EVERY);
            }
            told.insert(name.to_owned(), now);
        }
        let (conn, name) = (self.conn().clone(), name.to_owned());
        tokio::spawn(async move {
            let mut add = redis::cmd("XADD");
            add.arg(STREAM)
                .arg("MAXLEN")
                .arg("~")
                .arg(KEPT)
                .arg("*")
                .arg("d")
                .arg(&name);
            let sent: Result<Value, _> = bounded(add.query_async(&mut conn.clone()), CALL).await;
            if let Err(e) = sent {
                tracing::debug!(error = %e, destination = %name, "shared queue: an admission was not told to the fleet (its scan finds it)");
            }
        });
    }

    /// Starts `name`'s drain here if it sleeps (and `name` is open here).
    pub(crate) fn wake(&self, name: &str) {
        if self.draining(name) {
            return;
        }
        if let Some(lane) = self.lane(name).filter(|l| l.open) {
            self.start_drain(name, &lane);
        }
    }

    /// Wakes every open destination whose drain sleeps here and whose
    /// queue holds work: how many.
    async fn scan(&self) -> usize {
        let mut woken = 0;
        for (name, lane) in self.all() {
            if !lane.open || self.draining(&name) {
                continue;
            }
            if lane.queue.depth().await.is_ok_and(|d| d > 0) {
                self.wake(&name);
                woken += 1;
            }
        }
        woken
    }
}

/// The newest message's id on the stream (`0-0` when it has none).
async fn newest(shared: &Shared) -> Option<String> {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(STREAM).arg("+").arg("-").arg("COUNT").arg(1);
    let v: Value = bounded(cmd.query_async(&mut shared.conn().clone()), CALL)
        .await
        .ok()?;
    let first = array(v, 0, "wake stream").ok()?.into_iter().next();
    Some(match first {
        Some(entry) => array(entry, 1, "wake entry").ok()?.first().and_then(text)?,
        None => "0-0".to_owned(),
    })
}

/// The messages after `after`: their ids and destinations.
async fn read(shared: &Shared, after: &str) -> Option<Vec<(String, String)>> {
    let mut cmd = redis::cmd("XREAD");
    cmd.arg("COUNT")
        .arg(1024)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(after);
    let v: Value = bounded(cmd.query_async(&mut shared.conn().clone()), CALL)
        .await
        .ok()?;
    if matches!(v, Value::Nil) {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for stream in array(v, 0, "wake read").ok()? {
        let parts = array(stream, 2, "wake stream").ok()?;
        let Some(Value::Array(entries)) = parts.into_iter().nth(1) else {
            continue;
        };
        for entry in entries {
            let fields = array(entry, 2, "wake entry").ok()?;
            let id = text(&fields[0])?;
            let name = match &fields[1] {
                Value::Array(kv) => kv.get(1).and_then(text),
                _ => None,
            };
            out.extend(name.map(|n| (id, n)));
        }
    }
    Some(out)
}

/// Until the relay stops (`shared` dropped, or finishing): the stream read
/// every [`POLL`] and each destination named woken here; every
/// [`SCAN_EVERY`] (the first at once) the sleeping destinations' depths
/// read.
pub(crate) async fn listen(shared: Weak<Shared>) {
    let mut after: Option<String> = None;
    let mut scan_at = Instant::now();
    loop {
        let Some(s) = shared.upgrade() else { return };
        if s.finishing() {
            return;
        }
        if after.is_none() {
            after = newest(&s).await;
        }
        if let Some(from) = after.clone()
            && let Some(told) = read(&s, &from).await
        {
            for (id, name) in told {
                s.wake(&name);
                after = Some(id);
            }
        }
        if scan_at <= Instant::now() {
            scan_at = Instant::now() + SCAN_EVERY;
            let woken = s.scan().await;
            if woken > 0 {
                tracing::debug!(woken, "shared queue: sleeping destinations with work woken");
            }
        }
        drop(s);
        tokio::time::sleep(POLL).await;
    }
}
