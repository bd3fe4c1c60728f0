//! Where a copy of an event this relay delivers tells what happened: the
//! fleet's events in Redis.

use super::redis::events::{Ended, RedisEvents};
use crate::domain::event_copy::{CopyReports, EventCopy};
use crate::events::record::{CopyState, Told};

/// Where a copy this relay delivers tells its attempts and its end: the
/// fleet's events in Redis (not awaited by the delivery).
pub(crate) struct Reports(pub(crate) RedisEvents);

impl CopyReports for Reports {
    fn tell(&self, copy: &EventCopy, told: Told) {
        let store = self.0.clone();
        let (app, id, endpoint) = (copy.app.clone(), copy.seq, copy.endpoint.clone());
        tokio::spawn(async move {
            let written = match told {
                // The fleet's queue keeps each retry's time itself.
                Told::Attempt { attempt, ended, .. } => {
                    let ended = match ended {
                        Some(CopyState::Delivered) => Ended::Delivered,
                        _ => Ended::No,
                    };
                    store.attempted(&app, id, &endpoint, &attempt, ended).await
                }
                Told::DeadLettered(reason) | Told::Lettering(reason) => {
                    store
                        .ended(&app, id, &endpoint, Ended::DeadLettered(reason))
                        .await
                }
                // The fleet's letters are in Redis, written with the end.
                Told::Lettered => Ok(()),
            };
            if let Err(e) = written {
                tracing::warn!(error = %e, event = id, endpoint = %endpoint, "the fleet's events: a copy's attempt or end was not recorded");
            }
        });
    }
}
