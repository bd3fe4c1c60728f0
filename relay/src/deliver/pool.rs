//! The idle connections to one origin (scheme, host and port): HTTP/1.1
//! senders (hyper's `client::conn`) kept for the next delivery, newest
//! first, at most a bound of them. Every destination at that origin
//! shares them ([`shared`]): its [`Endpoint`](super::endpoint::Endpoint)
//! holds the pool, found once when the endpoint is parsed, so taking one is
//! a lock and a short scan (no key hashed per delivery). A pool lives as
//! long as a destination at its origin has work: once they are all idle
//! it is dropped, and its connections closed.
//!
//! A sender is given back as soon as its answer's head came, even if its
//! connection is still finishing the answer (hyper drains a short body it
//! already holds, and closes the connection on a longer one): taking skips
//! a sender not ready yet, and lets go of one whose connection has closed
//! (the receiver's idle timeout, or a body cut short) or that has been idle
//! longer than [`IDLE_TIMEOUT`] (its name is then resolved again by the
//! next connection). Nothing is spawned and no timer runs: a destination
//! that stops receiving keeps its idle connections until it is used again
//! or the receiver closes them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

/// What a pooled connection sends.
pub(crate) type Sender = SendRequest<Full<Bytes>>;

/// How long a connection may stay idle and still be used (hyper-util's
/// pool, and reqwest's, use the same).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The pool of `origin` (`scheme://host:port`, as the request names it),
/// shared by every endpoint at that origin while any of them holds it.
pub(crate) fn shared(origin: &str) -> Arc<Idle> {
    /// Pools by origin, weakly: held by the endpoints of destinations with
    /// work.
    #[derive(Default)]
    struct Pools {
        by_origin: HashMap<String, Weak<Idle>>,
        /// Pools made since the map was last swept of those let go.
        made: usize,
    }
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(idle) = pools.by_origin.get(origin).and_then(Weak::upgrade) {
        return idle;
    }
    let idle = Arc::new(Idle::default());
    pools
        .by_origin
        .insert(origin.to_owned(), Arc::downgrade(&idle));
    pools.made += 1;
    if pools.made > pools.by_origin.len() / 2 + 64 {
        pools.by_origin.retain(|_, p| p.strong_count() > 0);
        pools.made = 0;
    }
    idle
}

/// The idle connections to one origin.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    /// Oldest first; each with when it was given back.
    senders: Mutex<VecDeque<(Sender, Instant)>>,
}

impl Idle {
    /// An open, ready connection, if one is idle: the newest.
    pub(crate) fn take(&self) -> Option<Sender> {
        self.take_at(Instant::now())
    }

    /// [`take`](Idle::take) as at `now`.
    pub(crate) fn take_at(&self, now: Instant) -> Option<Sender> {
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        // The oldest first: closed or idle too long, let go (even while
        // newer ones keep being used).
        while senders.front().is_some_and(|(sender, since)| {
            sender.is_closed() || now.saturating_duration_since(*since) > IDLE_TIMEOUT
        }) {
            senders.pop_front();
        }
        let mut at = senders.len();
        while at > 0 {
            at -= 1;
            let (sender, _) = &senders[at];
            if sender.is_closed() {
                senders.remove(at);
            } else if sender.is_ready() {
                return senders.remove(at).map(|(sender, _)| sender);
            }
            // Still finishing its last answer: left for a later delivery.
        }
        None
    }

    /// Keeps `sender` for a later delivery, unless its connection has
    /// closed; with `most` kept already, the oldest is let go.
    pub(crate) fn give_back(&self, sender: Sender, most: usize) {
        self.give_back_at(sender, most, Instant::now());
    }

    /// [`give_back`](Idle::give_back) as at `now`.
    pub(crate) fn give_back_at(&self, sender: Sender, most: usize, now: Instant) {
        if sender.is_closed() || most == 0 {
            return;
        }
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        while senders.len() >= most {
            senders.pop_front();
        }
        senders.push_back((sender, now));
    }

    /// How many are kept: all, and those ready to send.
    #[cfg(test)]
    pub(crate) fn count(&self) -> (usize, usize) {
        let senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        let ready = senders.iter().filter(|(s, _)| s.is_ready()).count();
        (senders.len(), ready)
    }
}
