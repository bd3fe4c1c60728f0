#!/usr/bin/env bash
# Holds the relay to its OpenAPI documents with schemathesis (a pinned 4.x in
# a virtual environment): a live relay with a tenant key and an admin token,
# delivering to a loopback receiver that answers 204, drain rate and budget
# far above what the fuzzer sends (so any 5xx is a defect). Each listener is
# fuzzed with a valid key or token for each seed (1 to 4: a fresh relay and
# data directory per seed), and once without (the first seed, a tenth of
# the examples): every check, 100 examples per operation (FUZZ_EXAMPLES),
# every phase (the stateful one too).
#
#   bash scripts/fuzz_api.sh                 # builds the relay (debug)
#   RELAY_BIN=target/debug/dripfeed-relay bash scripts/fuzz_api.sh
#   FUZZ_SEEDS="7 8" bash scripts/fuzz_api.sh
#
# The venv is kept in target/fuzz-venv; the reports in target/fuzz-api/.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${FUZZ_EXAMPLES:-100}
SEEDS=${FUZZ_SEEDS:-${FUZZ_SEED:-1 2 3 4}}
root=$(pwd)
. scripts/lib.sh
venv=$root/target/fuzz-venv
work=$root/target/fuzz-api
rm -rf "$work"
mkdir -p "$work"

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python3 -m venv is missing: install the Debian package python3-venv" >&2
    exit 1
  fi
fi
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p dripfeed-relay --all-features
  bin=$root/target/debug/dripfeed-relay
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# The receiver: 204 to every POST, on a free loopback port it writes down.
python3 - "$work/receiver.port" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
rx_port=$(cat "$work/receiver.port")

key=fuzz-tenant-key
token=fuzz-admin-token
digest() { printf '%s' "$1" | "$bin" hash-key; }

# A fresh relay for seed $1, its data in $work/seed-$1: sets intake, admin, relay.
start_relay() {
  local dir=$work/seed-$1
  mkdir -p "$dir"
  cat > "$dir/relay.toml" <<TOML
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
admin_token_sha256 = "$(digest "$token")"
allow_destination_cidrs = ["127.0.0.0/8"]
drain_rate = 2000
latency_budget = "60s"
retries = 0
journal_dir = "$dir/journal"
dead_letter_file = "$dir/dead-letter.jsonl"

[[destinations]]
name = "billing"
url = "http://127.0.0.1:$rx_port/hooks"

[[destinations]]
name = "shipping"
url = "http://127.0.0.1:$rx_port/ship"

[[tenants]]
name = "acme"
[[tenants.keys]]
sha256 = "$(digest "$key")"
TOML
  "$bin" --config "$dir/relay.toml" >"$dir/relay.out" 2>"$dir/relay.err" &
  relay=$!
  pids+=($relay)
  local addresses
  addresses=$(relay_addresses "$dir/relay.out" "$dir/relay.err") || exit 1
  read -r intake admin <<<"$addresses"
  echo "seed $1: intake $intake, admin $admin, receiver 127.0.0.1:$rx_port"
}

status=0
fuzz() { # NAME SEED LISTENER URL EXAMPLES [HEADER]
  local name=$1 seed=$2 listener=$3 url=$4 examples=$5
  shift 5
  echo "== schemathesis: $name (seed $seed)"
  local started=$SECONDS
  # Run in $work: schemathesis keeps its cache (.schemathesis/) in the current directory.
  if ! (cd "$work" && "$venv/bin/schemathesis" --config-file "$root/scripts/schemathesis-$listener.toml" run "$url" \
      --checks all --max-examples "$examples" --seed "$seed" \
      --phases examples,coverage,fuzzing,stateful \
      --no-color --report junit,ndjson --report-junit-path "$work/$name.xml" --report-ndjson-path "$work/$name.ndjson" \
      "$@") >"$work/$name.log" 2>&1; then
    status=1
    echo "-- $name FAILED"
  fi
  tail -n 40 "$work/$name.log"
  echo "-- $name: $((SECONDS - started)) s"
}
first=1
for seed in $SEEDS; do
  start_relay "$seed"
  fuzz "intake-key-s$seed" "$seed" intake "http://$intake/openapi.json" "$EXAMPLES" -H "Authorization: Bearer $key"
  fuzz "admin-token-s$seed" "$seed" admin "http://$admin/openapi.json" "$EXAMPLES" -H "Authorization: Bearer $token"
  # Without a key or token nearly everything is a 401: once is enough, and
  # a tenth of the examples (100 per operation took 45 s of 401s).
  if [ $first = 1 ]; then
    fuzz "intake-nokey-s$seed" "$seed" intake "http://$intake/openapi.json" $((EXAMPLES / 10 + 1))
    fuzz "admin-notoken-s$seed" "$seed" admin "http://$admin/openapi.json" $((EXAMPLES / 10 + 1))
    first=0
  fi
  if ! kill -0 "$relay" 2>/dev/null; then
    echo "the relay died during seed $seed:" >&2
    cat "$work/seed-$seed/relay.err" >&2
    status=1
  fi
  kill "$relay" 2>/dev/null || true
  wait "$relay" 2>/dev/null || true
done

echo "== cases per operation and phase, statuses answered"
# (Methods a route does not have, probed once each for a 405, left out.)
python3 scripts/fuzz_summary.py "$work"/*.ndjson \
  | grep -v -E '^  (OPTIONS|PATCH|QUERY|TRACE) |^  (DELETE|PUT) /(healthz|metrics|readyz|v1/dead-letters|v1/destinations:|v1/webhooks)|^  POST /(healthz|metrics|readyz|v1/destinations|v1/webhooks/\{id\})' || true

exit $status
