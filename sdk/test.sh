#!/usr/bin/env bash
# Drives a live relay with each SDK: starts one (RELAY_BIN, else a debug
# build), runs sdk/python/test_live.py with the generated Python clients and
# sdk/typescript/test/live.ts compiled with tsc, each making its own
# destination, application and receiver. bash sdk/generate.sh installs the
# generators and runtime packages first (target/sdk-venv, sdk/typescript/node_modules).
#
#   bash sdk/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh
bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p dripfeed-relay
  bin=$root/target/debug/dripfeed-relay
fi
venv=$root/target/sdk-venv
[ -x "$venv/bin/python" ] && [ -d sdk/typescript/node_modules ] || bash sdk/generate.sh --check >/dev/null

work=$(mktemp -d)
relay=""
cleanup() {
  [ -n "$relay" ] && kill "$relay" 2>/dev/null && wait "$relay" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

key=sdk-tenant-key
token=sdk-admin-token
digest() { printf '%s' "$1" | "$bin" hash-key; }
cat > "$work/relay.toml" <<TOML
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
admin_token_sha256 = "$(digest "$token")"
allow_destination_cidrs = ["127.0.0.0/8"]
drain_rate = 100
retries = 0
journal_dir = "$work/journal"
dead_letter_file = "$work/dead-letter.jsonl"

# A relay starts with a destination; the tests make their own.
[[destinations]]
name = "placeholder"
url = "http://127.0.0.1:9/unused"

[[tenants]]
name = "sdk"
[[tenants.keys]]
sha256 = "$(digest "$key")"
TOML
"$bin" --config "$work/relay.toml" >"$work/relay.out" 2>"$work/relay.err" &
relay=$!
addresses=$(relay_addresses "$work/relay.out" "$work/relay.err")
read -r intake admin <<<"$addresses"
export INTAKE_URL=http://$intake ADMIN_URL=http://$admin INTAKE_KEY=$key ADMIN_TOKEN=$token

status=0
echo "-- python (intake $INTAKE_URL, admin $ADMIN_URL)"
PYTHONPATH=sdk/python "$venv/bin/python" sdk/python/test_live.py || status=1
echo "-- typescript"
(cd sdk/typescript && node_modules/.bin/tsc -p . && node dist/test/live.js) || status=1
[ $status = 0 ] || { echo "-- the relay's log:" >&2; tail -n 30 "$work/relay.err" >&2; }
exit $status
