#!/usr/bin/env bash
# Many endpoints on one relay (scripts/scale_bench.py says what is
# measured): builds the relay (release) unless RELAY_BIN is given, then
# runs the measurements for each count given (default 1000 10000).
#
#   bash scripts/scale_bench.sh 1000 10000 100000
#   QUEUE=redis REDIS=redis://127.0.0.1:6379/ bash scripts/scale_bench.sh 1000
#   RELAY_BIN=target/release/dripfeed-relay WORK=2000 SETTLE=60 bash scripts/scale_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q --release -p dripfeed-relay
  bin=target/release/dripfeed-relay
fi
exec python3 scripts/scale_bench.py "$bin" "$@"
