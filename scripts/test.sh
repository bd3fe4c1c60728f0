#!/usr/bin/env bash
# Runs dripfeed's tests on a fresh machine: installs what they need, then `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# promtool (Debian package prometheus) checks the relay's /metrics page.
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  else
    echo "promtool missing: install the Debian package prometheus (the check is skipped outside CI)" >&2
  fi
fi
# redis-server and redis-cli (Debian package redis-server) back the fleet-scope
# tests (tests/redis_fleet.rs, ...): each starts its own server on a free port.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server missing: install the Debian package redis-server (Redis tests fail under CI=true, skip elsewhere)" >&2
  fi
fi
# PostgreSQL (Debian package postgresql) backs the PgBuckets tests
# (tests/pg_buckets.rs): each runs initdb into a temporary directory as an
# unprivileged user and starts its own server on a free loopback port.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "initdb missing: install the Debian package postgresql (PostgreSQL tests fail under CI=true, skip elsewhere)" >&2
  fi
fi
# Chromium (Debian package chromium) renders the relay's status page in
# relay/tests/it/page.rs: headless, --dump-dom.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium missing: install the Debian package chromium (the browser test fails under CI=true, skips elsewhere)" >&2
  fi
fi
# Node.js (Debian package nodejs) runs the book's example receiver in
# relay/tests/it/doc_receivers.rs, beside python3.
if ! command -v node >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null
  else
    echo "node missing: install the Debian package nodejs (the receiver test fails under CI=true, skips elsewhere)" >&2
  fi
fi
if [ $# -gt 0 ]; then
  exec cargo test --workspace --all-features "$@"
fi
# Most of the tests through the binary wait on loopback peers and real
# time, not on the CPU: three at a time (on 2 cores the relay's suite took
# 125 s four at a time, 228 s two at a time).
cargo test --workspace --all-features -- --skip fleet_adaptive --skip chaos:: --test-threads 3
# (The two runs below select --tests, not --test it: that selection
# resolves some dependencies' features otherwise and rebuilt the relay's
# tests, half a minute each; with --tests every binary is the one built
# above, and those without these tests run none.)
# The fleet's adaptive-rate test (relay/tests/it/fleet_adaptive.rs) counts a
# receiver's answers per second for 60 s: it runs alone, after the rest, so
# the other tests' load does not take the receiver's capacity from under it.
# It measures a feedback loop in real time on whatever the machine has
# left: a run that misses its bands is run again, at most twice more (on
# a 2-core machine one run in three missed a band by a few percent at
# the snapshot before this line changed, with the same code), and each
# run's report stays in the log above the next.
adaptive() { cargo test --workspace --all-features --tests -- fleet_adaptive; }
adaptive || { echo "fleet_adaptive missed its bands once; running it again" >&2; adaptive; } \
  || { echo "fleet_adaptive missed its bands twice; running it a last time" >&2; adaptive; }
# The chaos runs (relay/tests/it/chaos/): a fleet through a Sentinel
# failover, kills and stops, and one relay through kills and a full disk,
# each for DRIPFEED_CHAOS_SECS (60 here; scripts/chaos.sh runs 10 minutes),
# side by side (they use a third of a core between them), then every
# webhook accounted for.
DRIPFEED_CHAOS_SECS="${DRIPFEED_CHAOS_SECS:-60}" \
  cargo test --workspace --all-features --tests -- chaos:: --test-threads 2 --nocapture
