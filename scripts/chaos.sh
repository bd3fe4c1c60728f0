#!/usr/bin/env bash
# Ten minutes of chaos for the fleet (three relays on a Sentinel-watched
# Redis: relays killed and stopped, the primary failed over, a flapping
# receiver) and ten for one relay on its journal (killed, its disk full),
# each followed by the checker's table (relay/tests/it/chaos/).
#   scripts/chaos.sh [SECONDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
export DRIPFEED_CHAOS_SECS="${1:-600}"
if [ -n "${2:-}" ]; then export DRIPFEED_CHAOS_SEED="$2"; fi
exec cargo test --workspace --all-features --tests -- chaos:: --test-threads 1 --nocapture
