//! One destination's circuit breaker as this relay sees the fleet's
//! ([`RedisBreaker`]): the drain asks it before each webhook, without a
//! round trip while it is closed; each attempt's end goes to Redis, those
//! that end while one is on its way going together in the next call (one
//! round trip per attempt at most, fewer under load). A relay learns that
//! another opened it from its own next attempt's answer. While it is open
//! the drain sends nothing and claims nothing; once the cool-down has
//! passed one relay of the fleet probes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::Delivery;
use dripfeed::metrics::{BREAKER_OPEN, BREAKER_OPENED};
use metrics::{Counter, Gauge, Label};
use tokio::time::Instant;

use super::redis::breaker::{End, RedisBreaker, Seen, State};
use crate::queue::NAME;
use crate::util::mutex::lock;

/// How often a drain looks again while another relay probes.
const PROBED_POLL: Duration = Duration::from_millis(250);

/// What the drain may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Send,
    /// Send one webhook, the fleet's probe.
    Probe,
    /// Send nothing; look again after this.
    Wait(Duration),
}

/// This relay's view.
struct View {
    state: State,
    /// Open until (a probe may go then).
    until: Instant,
    /// This relay's probe is out, since then (a probe not ended within its
    /// lease, such as one taken and then not sent, no longer counts).
    probe_out: Option<Instant>,
    /// Ends not yet in Redis, and whether a call is on its way.
    pending: Vec<End>,
    sending: bool,
    /// When Redis last told this relay the breaker's state.
    heard: Option<Instant>,
}

/// See the [module](self) docs.
pub(crate) struct FleetBreaker {
    /// Whether its series are its own.
    own: bool,
    redis: RedisBreaker,
    destination: Box<str>,
    view: Mutex<View>,
    open: Gauge,
    opened: Counter,
}

impl Drop for FleetBreaker {
    /// Takes its part out of the open gauge (a deleted destination's, or
    /// one made again with other series).
    fn drop(&mut self) {
        if lock(&self.view).state != State::Closed {
            self.open.decrement(1.0);
        }
    }
}

impl FleetBreaker {
    /// `destination`'s breaker, its series its own when `own` (else
    /// `_other`'s: the open gauge then counts those open).
    pub(crate) fn new(redis: RedisBreaker, destination: &str, own: bool) -> Self {
        let label = match own {
            true => destination,
            false => dripfeed::destinations::OTHER,
        };
        let labels = vec![
            Label::new("throttle", NAME),
            Label::new("destination", label.to_owned()),
        ];
        FleetBreaker {
            own,
            redis,
            destination: destination.into(),
            view: Mutex::new(View {
                state: State::Closed,
                until: Instant::now(),
                probe_out: None,
                pending: Vec::new(),
                sending: false,
                heard: None,
            }),
            open: metrics::gauge!(BREAKER_OPEN, labels.clone()),
            opened: metrics::counter!(BREAKER_OPENED, labels),
        }
    }

    /// Whether its series are its own.
    pub(crate) fn own(&self) -> bool {
        self.own
    }

    /// What the drain may do now.
    pub(crate) fn pass(&self) -> Pass {
        let lease = self.redis.probe_lease();
        let mut v = lock(&self.view);
        let out = v.probe_out.is_some_and(|at| at.elapsed() < lease);
        match v.state {
            State::Closed => Pass::Send,
            State::Probe if !out => {
                v.probe_out = Some(Instant::now());
                Pass::Probe
            }
            State::Open => Pass::Wait(v.until.saturating_duration_since(Instant::now())),
            State::Probe | State::Probed => Pass::Wait(PROBED_POLL),
        }
    }

    /// The probe taken was not sent (nothing to send): another may go.
    pub(crate) fn unprobe(&self) {
        lock(&self.view).probe_out = None;
    }

    /// Whether Redis has not told this relay the state for `for_` (or
    /// never): a drain waking with work asks before it sends.
    pub(crate) fn unheard(&self, for_: Duration) -> bool {
        lock(&self.view).heard.is_none_or(|at| at.elapsed() >= for_)
    }

    /// Whether the breaker, as last heard, lets this relay send as usual.
    pub(crate) fn closed(&self) -> bool {
        lock(&self.view).state == State::Closed
    }

    /// The state's label: `closed`, `open` or `half_open`.
    pub(crate) fn label(&self) -> &'static str {
        match lock(&self.view).state {
            State::Closed => "closed",
            State::Open => "open",
            State::Probe | State::Probed => "half_open",
        }
    }

    /// Asks Redis again (open past the cool-down: this relay may become
    /// the prober).
    pub(crate) async fn look(&self) {
        match self.redis.look().await {
            Ok(seen) => self.apply(seen),
            Err(e) => {
                tracing::debug!(error = %e, destination = %self.destination, "breaker: not read")
            }
        }
    }

    /// One attempt ended with `answer` (`timed_out`: the drain ended it);
    /// a receiver asking to slow down (a retry with a hint) is the rate's
    /// business, not the breaker's.
    pub(crate) fn ended(self: &Arc<Self>, answer: &Delivery, timed_out: bool, probe: bool) {
        let failed = match answer {
            _ if timed_out => true,
            Delivery::Done => false,
            Delivery::Retry { after: Some(_) } if !probe => return,
            Delivery::Retry { after: Some(_) } => false,
            _ => true,
        };
        {
            let mut v = lock(&self.view);
            v.pending.push(End { failed, probe });
            if v.sending {
                return; // the call on its way sends it next
            }
            v.sending = true;
        }
        tokio::spawn(self.clone().send());
    }

    /// Sends the ends not yet in Redis, until none are left.
    async fn send(self: Arc<Self>) {
        loop {
            let ends = {
                let mut v = lock(&self.view);
                if v.pending.is_empty() {
                    v.sending = false;
                    return;
                }
                std::mem::take(&mut v.pending)
            };
            match self.redis.record(&ends).await {
                Ok(seen) => self.apply(seen),
                Err(e) => {
                    // Not counted: the fleet decides from the others'.
                    tracing::debug!(error = %e, destination = %self.destination, "breaker: attempts not counted");
                    if ends.iter().any(|e| e.probe) {
                        lock(&self.view).probe_out = None;
                    }
                }
            }
        }
    }

    fn apply(&self, seen: Seen) {
        let mut v = lock(&self.view);
        let before = v.state;
        v.state = seen.state;
        v.heard = Some(Instant::now());
        v.until = Instant::now() + seen.left;
        if seen.state != State::Probe {
            v.probe_out = None;
        }
        drop(v);
        // By its changes, so `_other`'s gauge sums the breakers open.
        match (before == State::Closed, seen.state == State::Closed) {
            (true, false) => self.open.increment(1.0),
            (false, true) => self.open.decrement(1.0),
            _ => {}
        }
        if seen.opened_now {
            self.opened.increment(1);
            tracing::warn!(
                destination = %self.destination,
                cool_down = ?seen.left,
                opened = seen.opened,
                "destination breaker opened for the fleet: no relay sends to it until a probe succeeds"
            );
        } else if seen.state == State::Closed && before != State::Closed {
            tracing::info!(destination = %self.destination, "destination breaker closed");
        }
    }
}
