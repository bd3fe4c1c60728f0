//! `global_rate` with the fleet's queue: one limit over every destination
//! of the fleet. Each delivery takes a permit from its destination's
//! bucket in Redis and one from the fleet's global bucket ([`Both`]); when
//! the global bucket has none, the destination's permit goes back (unspent)
//! and the drain waits. Like the destinations' buckets it fails closed: a
//! relay that cannot reach Redis takes no permit.

use std::sync::Arc;

use dripfeed::global::{Failure, RedisConnection, RedisRate};
use dripfeed::{Permit, PermitSource};

/// The key of the fleet's global bucket (its own slot on a Cluster). No
/// destination's bucket can have it: theirs are `webhook_relay:queue:{NAME}`
/// (a destination named `global` included).
const KEY: &str = "webhook_relay:global_rate:{global}";

/// The fleet's global bucket at `rate` deliveries per second.
pub(super) fn bucket(conn: RedisConnection, rate: f64) -> Result<Arc<dyn PermitSource>, String> {
    let source = RedisRate::builder(conn, KEY, rate)
        .name("webhook_relay_queue_global")
        .on_failure(Failure::FailClosed)
        .start()
        .map_err(|e| format!("global_rate: {e}"))?;
    source.set_local_rate(rate);
    Ok(Arc::new(source))
}

/// A permit from each of two sources, or none.
pub(super) struct Both {
    /// The destination's.
    pub one: Arc<dyn PermitSource>,
    /// The fleet's, shared by every destination.
    pub all: Arc<dyn PermitSource>,
}

#[async_trait::async_trait]
impl PermitSource for Both {
    fn try_take(&self) -> Option<Permit<'_>> {
        let one = self.one.try_take()?;
        // None: `one` is dropped unspent, back in its bucket.
        let all = self.all.try_take()?;
        one.spend();
        all.spend();
        Some(Permit::new(self))
    }

    fn give_back(&self) {
        self.one.give_back();
        self.all.give_back();
    }

    async fn ready(&self) {
        self.one.ready().await;
        self.all.ready().await;
    }

    fn set_local_rate(&self, jobs_per_second: f64) {
        self.one.set_local_rate(jobs_per_second);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Pool(AtomicU32);

    #[async_trait::async_trait]
    impl PermitSource for Pool {
        fn try_take(&self) -> Option<Permit<'_>> {
            let taken = self
                .0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            taken.is_ok().then(|| Permit::new(self))
        }
        fn give_back(&self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
        async fn ready(&self) {}
    }

    fn left(p: &Arc<Pool>) -> u32 {
        p.0.load(Ordering::Acquire)
    }

    #[test]
    fn a_permit_takes_one_of_each_and_gives_both_back_unspent() {
        let (one, all) = (
            Arc::new(Pool(AtomicU32::new(3))),
            Arc::new(Pool(AtomicU32::new(1))),
        );
        let both = Both {
            one: one.clone(),
            all: all.clone(),
        };
        drop(both.try_take().unwrap());
        assert_eq!(
            (left(&one), left(&all)),
            (3, 1),
            "dropped unspent: both back"
        );
        both.try_take().unwrap().spend();
        assert_eq!((left(&one), left(&all)), (2, 0));
        assert!(both.try_take().is_none(), "the shared one is spent");
        assert_eq!(left(&one), 2, "the destination's went back");
    }
}
