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
//! - entries a stopping drain hands back are told too, whatever the limit;
//! - at start, and [`SCAN_EVERY`] after each scan, each relay reads the
//!   depth of the destinations whose drain sleeps here and wakes those
//!   with work (a message lost with a Redis restart, a relay that died
//!   holding webhooks): one round trip per sleeping destination and scan.

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
/// How long each relay waits between scans of its sleeping destinations'
/// depths.
const SCAN_EVERY: Duration = Duration::from_secs(30);
/// The most messages one read of the stream takes.
const READ: usize = 1024;

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
            // Bounded: forgotten whole now and then (a few more tells).
            if told.len() >= 4 * KEPT as usize {
                told.clear();
            }
            told.insert(name.to_owned(), now);
        }
        tell(&self.conn().counted_as("wake"), name);
    }

    /// Starts `name`'s drain here if it sleeps: an open destination, or
    /// one being deleted whose drain was not stopped yet (it delivers
    /// within the deletion's grace).
    pub(crate) fn wake(&self, name: &str) {
        if self.draining(name) {
            return;
        }
        if let Some(lane) = self.lane(name).filter(|l| l.open || self.has_drain(name)) {
            self.start_drain(name, &lane);
        }
    }

    /// Wakes every destination whose drain sleeps here (and may wake) and
    /// whose queue holds work: how many; stops at Redis's first failure.
    async fn scan(&self) -> usize {
        let mut woken = 0;
        for (name, lane) in self.all() {
            if self.finishing() || self.draining(&name) || !(lane.open || self.has_drain(&name)) {
                continue;
            }
            match lane.queue.depth().await {
                Ok(0) => {}
                Ok(_) => {
                    self.wake(&name);
                    woken += 1;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "shared queue: the scan of sleeping destinations stops here");
                    break;
                }
            }
        }
        woken
    }
}

/// Tells every relay of the fleet that `name` has work (one message on
/// the stream, sent in a task of its own).
pub(super) fn tell(conn: &dripfeed::global::RedisConnection, name: &str) {
    let (mut conn, name) = (conn.clone(), name.to_owned());
    tokio::spawn(async move {
        let mut add = redis::cmd("XADD");
        add.arg(STREAM)
            .arg("MAXLEN")
            .arg("~")
            .arg(KEPT)
            .arg("*")
            .arg("d")
            .arg(&name);
        let sent: Result<Value, _> = bounded(add.query_async(&mut conn), CALL).await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, destination = %name, "shared queue: work was not told to the fleet (its scan finds it)");
        }
    });
}

/// The newest message's id on the stream (`0-0` when it has none).
async fn newest(shared: &Shared) -> Option<String> {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(STREAM).arg("+").arg("-").arg("COUNT").arg(1);
    let v: Value = bounded(cmd.query_async(&mut shared.conn().counted_as("wake")), CALL)
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
        .arg(READ)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(after);
    let v: Value = bounded(cmd.query_async(&mut shared.conn().counted_as("wake")), CALL)
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
/// every [`POLL`] (until a read comes back short) and each destination
/// named woken here; beside it, in a task of its own, the sleeping
/// destinations' depths read at once and then [`SCAN_EVERY`] after each
/// scan ends.
pub(crate) async fn listen(shared: Weak<Shared>) {
    tokio::spawn(scans(shared.clone()));
    let mut after: Option<String> = None;
    loop {
        let Some(s) = shared.upgrade() else { return };
        if s.finishing() {
            return;
        }
        if after.is_none() {
            after = newest(&s).await;
        }
        while let Some(from) = after.clone()
            && let Some(told) = read(&s, &from).await
        {
            let short = told.len() < READ;
            for (id, name) in told {
                s.wake(&name);
                after = Some(id);
            }
            if short {
                break;
            }
        }
        drop(s);
        tokio::time::sleep(POLL).await;
    }
}

/// The scans of [`listen`].
async fn scans(shared: Weak<Shared>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        if s.finishing() {
            return;
        }
        let woken = s.scan().await;
        if woken > 0 {
            tracing::debug!(woken, "shared queue: sleeping destinations with work woken");
        }
        drop(s);
        tokio::time::sleep(SCAN_EVERY).await;
    }
}
