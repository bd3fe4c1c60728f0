//! The fleet's engine (`queue = redis`): every relay of a fleet takes
//! webhooks into one queue per destination in Redis Streams and delivers
//! from it ([`shared`]: the lanes and their drains, [`drain`]), so a relay
//! that dies loses nothing. Idempotency keys, webhook statuses, counts and
//! dead letters live in Redis beside the queues ([`letters`]); destinations
//! made, changed and deleted through any relay's admin API are the
//! fleet's ([`changes`], [`change`]); a deleted destination's rest is
//! dead-lettered ([`sweep`]). [`link`] is the one way to reach Redis, a
//! server or a cluster.

pub(crate) mod admit;
mod breaker;
pub(crate) mod change;
pub(crate) mod changes;
pub(crate) mod counts;
mod drain;
mod driven;
pub(crate) mod durability;
pub(crate) mod events;
mod global;
pub(crate) mod lane;
pub(crate) mod letters;
pub(crate) mod link;
pub(crate) mod open;
pub(crate) mod redis;
mod reports;
pub(crate) mod shared;
mod steer;
mod sweep;
mod wake;
mod webhook_id;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use redis::queue_status::{JobState, JobStatus};

use super::contract::{
    Accepted, Admission, ChangeRefused, Changed, Drained, LetterError, LetterPage, LetterQuery,
    Queue, Redrive, Redriven, Refusal,
};
use super::stores::StoreCheck;
use crate::catalog::Catalog;
use crate::catalog::edit::{Edit, Precondition};
use crate::catalog::vet::Vetter;
use crate::config::{Destination, Fields};
use crate::dead_letter::health::Unavailable;
use crate::domain::limits::Limits;
use crate::domain::schemas::{Deleting, Live};
use crate::status::{Found, State, Status};
use changes::Fleet;
use shared::Shared;

/// The fleet's engine (see the [module](self) docs).
pub(crate) struct FleetQueue {
    shared: Arc<Shared>,
    changes: Arc<Fleet>,
    catalog: Arc<Catalog>,
    limits: Limits,
    /// The shared tenant quota store `/readyz` asks, if any.
    stores: Vec<StoreCheck>,
    /// Whether Redis still keeps what it acknowledged (`/readyz`).
    durability: Arc<durability::Watch>,
    max_destinations: usize,
    grace: Duration,
    /// Fan-outs under way on this relay, at most [`events::FAN_OUTS`]: a
    /// post waits for a place, so intake slows down rather than piling
    /// up copies in memory faster than Redis takes them.
    fanning: Arc<tokio::sync::Semaphore>,
}

/// A status read from the fleet's records, as the registry's.
fn found((destination, s): (String, JobStatus)) -> Found {
    Found {
        status: Status {
            state: match s.state {
                JobState::Queued => State::Queued,
                JobState::InFlight => State::InFlight,
                JobState::RetryWaiting => State::RetryWaiting,
                JobState::Delivered => State::Delivered,
                JobState::DeadLettered => State::DeadLettered,
            },
            tenant: s.owner.map(Arc::from),
            destination: Some(Arc::from(destination)),
            attempts: s.attempts,
            last_status: s.last_status,
            last_error: s.last_error.map(Arc::from),
            next_attempt_unix_ms: s.next_attempt_unix_ms,
            received_unix_ms: Some(s.received_unix_ms),
        },
        ended_unix_ms: s.ended_unix_ms,
    }
}

#[async_trait::async_trait]
impl Queue for FleetQueue {
    fn not_keeping(&self) -> Option<Unavailable> {
        // Dead letters are kept in Redis, by the script that ends a webhook.
        None
    }

    fn drain_wait(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn make_room(&self, _bytes: u64) {}

    async fn admit(&self, a: Admission) -> Result<Accepted, Refusal> {
        admit::admit(&self.shared, a).await
    }

    async fn status(&self, id: u64) -> Result<Option<Found>, String> {
        let Some((name, status)) = self.shared.status(id).await? else {
            return Ok(None);
        };
        // An event's id names no webhook (its copies are the event's to
        // show): 404, as the local engine answers, not one copy's status.
        if let Some(app) = self.catalog.application_of(&name) {
            let event = self.shared.events.record(&app, id).await;
            if event.map_err(|e| e.to_string())?.is_some() {
                return Ok(None);
            }
        }
        Ok(Some(found((name, status))))
    }

    fn busiest(&self, k: usize) -> Vec<(String, u64)> {
        self.shared.busiest(k)
    }

    fn events(&self) -> &dyn crate::queue::events::Events {
        self
    }

    async fn live(&self, name: &str) -> Option<Live> {
        let lane = self.shared.lane(name)?;
        let (depth, counts) = tokio::join!(lane.queue.depth(), lane.queue.counts());
        // While Redis cannot be read: the last known, not zeros.
        let (depth, counts) = lane.counts.fleet_state(depth.ok(), counts.ok());
        Some(Live {
            active: self.shared.draining(name),
            rate_now: lane.rate_now(),
            depth,
            capacity: lane.bound_now(),
            in_flight: self.shared.in_flight(name),
            held: depth,
            breaker: self.shared.breaker_label(name).to_owned(),
            accepted: counts.accepted,
            refused: counts.refused,
            delivered: counts.delivered,
            dead_lettered: counts.dead_lettered,
        })
    }

    async fn current(&self, name: &str) -> Result<Option<Fields>, ChangeRefused> {
        change::current(self, name).await
    }

    async fn change(
        &self,
        name: &str,
        edit: Edit,
        pre: &Precondition,
        vet: &Vetter,
    ) -> Result<Changed, ChangeRefused> {
        change::change(self, name, edit, pre, vet).await
    }

    async fn delete(&self, name: &str, pre: &Precondition) -> Result<Deleting, ChangeRefused> {
        change::delete(self, name, pre).await
    }

    async fn reconfigure(
        &self,
        changes: Vec<(String, Option<Destination>)>,
    ) -> Result<Vec<String>, ChangeRefused> {
        self.changes.reconfigure(changes).await
    }

    async fn dead_letters(&self, q: LetterQuery) -> Result<LetterPage, LetterError> {
        let cursor = match q.cursor.as_deref().map(letters::Cursor::parse) {
            Some(None) => return Err(LetterError::BadCursor),
            Some(c) => c,
            None => None,
        };
        let page = self
            .shared
            .dead_letters(q.destination.as_deref(), cursor, q.limit)
            .await
            .map_err(|e| {
                LetterError::Unreadable(format!(
                    "the fleet's dead letters (Redis) cannot be read: {e}"
                ))
            })?;
        Ok(LetterPage {
            lines: page.lines,
            next: page.next,
            more: page.more,
        })
    }

    async fn redrive(&self, what: Redrive, most: usize) -> Result<Redriven, LetterError> {
        let (ids, destination): (Option<HashSet<String>>, Option<String>) = match what {
            Redrive::Ids(ids) => (Some(ids), None),
            Redrive::Destination(d) => (None, Some(d)),
        };
        self.shared
            .redrive(ids.as_ref(), destination.as_deref(), most, &self.catalog)
            .await
            .map_err(|e| {
                LetterError::Unreadable(format!(
                    "the fleet's dead letters (Redis) cannot be read or redriven: {e}"
                ))
            })
    }

    async fn down(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        match tokio::time::timeout(Duration::from_secs(1), self.shared.ping()).await {
            Err(_) => out.push((
                "redis",
                "redis (the shared queue) did not answer within 1s".to_owned(),
            )),
            Ok(Err(e)) => out.push(("redis", format!("redis (the shared queue): {e}"))),
            Ok(Ok(())) => {}
        }
        if !self
            .shared
            .map_read
            .load(std::sync::atomic::Ordering::Acquire)
        {
            out.push((
                "redis",
                "the fleet's destinations (made through its admin API) are not read yet".to_owned(),
            ));
        }
        for store in &self.stores {
            if let Some(why) = store.down().await {
                out.push((store.name, why));
            }
        }
        if let Some(why) = self.durability.short().await {
            out.push(("redis_durability", why));
        }
        out
    }

    async fn publish(&self) {
        // Only the destinations with series of their own show the fleet's
        // depth (a scrape reads no depth for the many summed into
        // `_other`), read 256 to a round trip.
        let own: Vec<_> = self
            .shared
            .all()
            .into_iter()
            .filter(|(_, lane)| lane.counts.own())
            .collect();
        let _ = shared::Shared::each_depth(&own, |_, lane, depth| {
            lane.counts.fleet_depth(depth);
            true
        })
        .await;
    }

    async fn shutdown(&self, grace: Duration) -> Drained {
        // Deletions under way end where they are: the fleet finishes them.
        self.catalog.finish().await;
        // The drains claim nothing more and end the deliveries they hold.
        self.shared.finish(grace).await;
        Drained {
            delivered: self.shared.delivered_here(),
            ..Drained::default()
        }
    }
}
