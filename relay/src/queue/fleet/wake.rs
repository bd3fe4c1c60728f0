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
//!   holding webhooks): one round trip per 256 sleeping destinations and
//!   scan (per destination in a cluster, whose pipelines cannot cross
//!   slots).

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::redis::wake_stream::{READ, newest, read, tell};
use super::shared::Shared;
use crate::util::mutex::lock;

/// How often a relay tells the fleet of admissions to one destination, at
/// most.
const TELL_EVERY: Duration = Duration::from_secs(1);
/// How often each relay reads the stream.
const POLL: Duration = Duration::from_millis(250);
/// How long each relay waits between scans of its sleeping destinations'
/// depths.
const SCAN_EVERY: Duration = Duration::from_secs(30);

impl Shared {
    /// After an admission to `name` on this relay: its drain here woken,
    /// and the fleet told (at most once a [`TELL_EVERY`]).
    pub(crate) fn admitted(&self, name: &str) {
        self.wake(name);
        let now = Instant::now();
        {
            let mut told = lock(&self.told);
            if told
                .get(name)
                .is_some_and(|at| now.duration_since(*at) < TELL_EVERY)
            {
                return;
            }
            // Bounded: forgotten whole now and then (a few more tells).
            if told.len() >= 40_000 {
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
    /// Their depths are read many to a round trip ([`Shared::each_depth`]).
    async fn scan(&self) -> usize {
        let asleep: Vec<_> = self
            .all()
            .into_iter()
            .filter(|(name, lane)| !self.draining(name) && (lane.open || self.has_drain(name)))
            .collect();
        let mut woken = 0;
        if self.finishing() {
            return woken;
        }
        let read = Shared::each_depth(&asleep, |name, _, depth| {
            if depth > 0 {
                self.wake(name);
                woken += 1;
            }
            !self.finishing()
        })
        .await;
        if let Err(e) = read {
            tracing::debug!(error = %e, "shared queue: the scan of sleeping destinations stops here");
        }
        woken
    }
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
            after = newest(&s.conn().counted_as("wake")).await;
        }
        while let Some(from) = after.clone()
            && let Some(told) = read(&s.conn().counted_as("wake"), &from).await
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
        // The drains that went to sleep since: their handles let go.
        s.forget_sleepers();
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
