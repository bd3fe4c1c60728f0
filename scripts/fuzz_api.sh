#!/usr/bin/env bash
# Holds the relay to its OpenAPI documents with schemathesis (a pinned 4.x in
# a virtual environment): a live relay with a tenant key and an admin token,
# delivering to a loopback receiver that answers 204, drain rate and budget
# far above what the fuzzer sends (so any 5xx is a defect). Each listener is
# fuzzed twice, with and without a valid key or token: every check, 100
# examples per operation, every phase (the stateful one too), seed 1.
#
#   bash scripts/fuzz_api.sh                 # builds the relay (debug)
#   RELAY_BIN=target/debug/dripfeed-relay bash scripts/fuzz_api.sh
#
# The venv is kept in target/fuzz-venv; the reports in target/fuzz-api/.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${FUZZ_EXAMPLES:-100}
SEED=${FUZZ_SEED:-1}
root=$(pwd)
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
cat > "$work/relay.toml" <<TOML
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
admin_token_sha256 = "$(digest "$token")"
allow_destination_cidrs = ["127.0.0.0/8"]
drain_rate = 2000
latency_budget = "60s"
retries = 0
journal_dir = "$work/journal"
dead_letter_file = "$work/dead-letter.jsonl"

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

"$bin" --config "$work/relay.toml" >"$work/relay.out" 2>"$work/relay.err" &
relay=$!
pids+=($relay)
for _ in $(seq 100); do grep -q '^webhook relay on http://' "$work/relay.out" && break; sleep 0.1; done
intake=$(sed -n 's|^webhook relay on http://\([^:]*:[0-9]*\):.*|\1|p' "$work/relay.out")
admin=$(sed -n 's|^admin on http://\([^:]*:[0-9]*\):.*|\1|p' "$work/relay.out")
[ -n "$intake" ] && [ -n "$admin" ] || { cat "$work/relay.out" "$work/relay.err" >&2; exit 1; }
echo "relay: intake $intake, admin $admin, receiver 127.0.0.1:$rx_port"

status=0
fuzz() { # NAME URL [HEADER]
  local name=$1 url=$2
  shift 2
  echo "== schemathesis: $name"
  local started=$SECONDS
  # Run in $work: schemathesis keeps its cache (.schemathesis/) in the current directory.
  if ! (cd "$work" && "$venv/bin/schemathesis" --config-file "$root/scripts/schemathesis.toml" run "$url" \
      --checks all --max-examples "$EXAMPLES" --seed "$SEED" \
      --phases examples,coverage,fuzzing,stateful \
      --no-color --report junit,ndjson --report-junit-path "$work/$name.xml" --report-ndjson-path "$work/$name.ndjson" \
      "$@") >"$work/$name.log" 2>&1; then
    status=1
  fi
  tail -n 40 "$work/$name.log"
  echo "-- $name: $((SECONDS - started)) s"
}
fuzz intake-key "http://$intake/openapi.json" -H "Authorization: Bearer $key"
fuzz intake-nokey "http://$intake/openapi.json"
fuzz admin-token "http://$admin/openapi.json" -H "Authorization: Bearer $token"
fuzz admin-notoken "http://$admin/openapi.json"

echo "== cases per operation and phase, statuses answered"
# (Methods a route does not have, probed once each for a 405, left out.)
python3 scripts/fuzz_summary.py "$work"/*.ndjson \
  | grep -v -E '^  (OPTIONS|PATCH|QUERY|TRACE) |^  (DELETE|PUT) /(healthz|metrics|readyz|v1/dead-letters|v1/destinations:|v1/webhooks)|^  POST /(healthz|metrics|readyz|v1/destinations|v1/webhooks/\{id\})' || true

if ! kill -0 "$relay" 2>/dev/null; then
  echo "the relay died during the run:" >&2
  cat "$work/relay.err" >&2
  status=1
fi
exit $status
