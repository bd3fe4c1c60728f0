#!/usr/bin/env bash
# How many instructions a per-key check executes, dripfeed's `KeyedBuckets`
# beside governor's and throttle-net's keyed limiters, counted by
# valgrind's callgrind on the keyed_peers bench's workload (100,000 keys,
# 1,000,000 checks, 1 thread): steady where the ns per check of a shared
# machine move by half from one run to the next.
#
# Each store is counted over one round and over two; the difference is one
# round (building and filling the store, 100,000 admissions, then the
# 1,000,000 checks), given per operation (÷ 1,100,000).
#
#   bash scripts/instructions_per_check.sh            # u64 and String keys
#   KEYS="u64" bash scripts/instructions_per_check.sh
# Takes about two minutes after the bench is built.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
need_tools valgrind

bench=$(cargo bench --features quanta --bench keyed_peers --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*keyed_peers[^"]*\)".*/\1/p' | tail -1)
[ -x "$bench" ] || { echo "the keyed_peers bench was not built" >&2; exit 2; }

count() { # store, rounds, table
  ONLY="$1" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bench" --rounds "$2" "$3" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "| keys | store | instructions per operation |"
echo "|---|---|---:|"
for keys in ${KEYS:-u64 String}; do
  for store in governor throttle-net dripfeed "dripfeed, time given" "dripfeed, foldhash" "dripfeed, Prehashed"; do
    one=$(count "$store" 1 "$keys/1t")
    two=$(count "$store" 2 "$keys/1t")
    echo "| $keys | $store | $(( (two - one) / 1100000 )) |"
  done
done
