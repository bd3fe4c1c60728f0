//! Chaos with a checker, as Jepsen-style tests run a system: minutes of
//! mixed faults against the relay as its users run it (the binary, a real
//! receiver, real Redis with Sentinel), while a client posts at a steady
//! rate with `Idempotency-Key`s and keeps every answer; then the checker
//! ([`check`]) accounts for every webhook from the client's answers, the
//! receiver's log and the dead letters, and prints the run's table.
//!
//! Skipped unless `DRIPFEED_CHAOS_SECS` says how long each run lasts:
//! `scripts/test.sh` (and so `.ci/run`) runs both for 60 s, side by side,
//! after the other tests; `scripts/chaos.sh` each for 10 minutes. `DRIPFEED_CHAOS_SEED` replays
//! a run's faults (its seed is printed).

mod check;
mod client;
#[cfg(feature = "redis")]
mod fleet;
mod local;
mod rx;
