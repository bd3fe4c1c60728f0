#!/usr/bin/env bash
# How many instructions the relay executes in user space per webhook
# (intake and delivery together), counted by valgrind's callgrind: steadier
# than CPU time on a shared machine, so a change of a few per cent shows.
#
# Starts, on free loopback ports in a temporary directory, an nginx
# `return 204` receiver and the relay (RELAY_BIN) under callgrind with
# instrumentation off; warms up with WARM webhooks, switches instrumentation
# on (callgrind_control -i on), sends N webhooks with `hey -c 8`, waits until
# every webhook has been delivered, switches it off, and prints the total and
# the count per webhook. The kernel's share (syscalls, TCP) is not counted.
#
#   RELAY_BIN=target/release/dripfeed-relay bash scripts/instructions_per_webhook.sh
# Without RELAY_BIN it builds the relay (cargo build --release -p dripfeed-relay).
# Knobs (environment):
#   N=4000 WARM=500
#   JOURNAL=off|on      off: --no-journal; on: --journal-dir in the temp dir
#   RELAY_ARGS="..."    extra flags for the relay, split on whitespace
#   KEEP=dir            copy callgrind's output there (for callgrind_annotate)
# Takes about a minute (the relay runs some 50x slower under valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
need_tools valgrind hey nginx curl

n=${N:-4000}
warm=${WARM:-500}
journal_mode=${JOURNAL:-off}
body='{"event":"order.created","id":12345,"amount":99.5}'

bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -p dripfeed-relay -q
  bin=target/release/dripfeed-relay
fi
[ -x "$bin" ] || { echo "relay binary not found or not executable: $bin" >&2; exit 2; }
extra_args=()
if [ -n "${RELAY_ARGS:-}" ]; then read -r -a extra_args <<<"$RELAY_ARGS"; fi

work=$(mktemp -d)
chmod 755 "$work"
nginx_pid=
relay_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill -9 "$relay_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

read -r receiver_port relay_port admin_port <<<"$(free_ports 3)"
{
  nginx_conf_head "$work"
  echo "  server { listen 127.0.0.1:$receiver_port; location / { return 204; } }"
  echo "}"
} >"$work/nginx.conf"
nginx -p "$work" -c "$work/nginx.conf" -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 50); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$receiver_port/")" = 204 ] && break
  sleep 0.1
done

case "$journal_mode" in
  off) journal=(--no-journal) ;;
  on) journal=(--journal-dir "$work/journal") ;;
  *) echo "JOURNAL must be on or off, not '$journal_mode'" >&2; exit 2 ;;
esac
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.out" \
  "$bin" --listen "127.0.0.1:$relay_port" --admin-listen "127.0.0.1:$admin_port" \
  --downstream "http://127.0.0.1:$receiver_port/hooks" --allow-destination-cidr 127.0.0.0/8 \
  --drain-rate 1000000 --latency-budget 200ms --max-in-flight 256 \
  --dead-letter-file "$work/dead-letters.jsonl" "${journal[@]}" "${extra_args[@]}" \
  >"$work/relay.log" 2>&1 &
relay_pid=$!
healthy=
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$admin_port/healthz" >/dev/null && { healthy=1; break; }
  kill -0 "$relay_pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$healthy" ] || { echo "the relay did not start; its log:" >&2; tail -5 "$work/relay.log" >&2; exit 1; }

# Webhooks the relay has delivered (its leaky_bucket_jobs_total, outcome="delivered").
delivered() {
  { curl -sf "http://127.0.0.1:$admin_port/metrics" || true; } \
    | awk '/^leaky_bucket_jobs_total[{]/ && /outcome="delivered"/ { s += $NF } END { printf "%.0f\n", s }'
}

url="http://127.0.0.1:$relay_port/v1/webhooks/deliver"
warmed=$(hey -n "$warm" -c 8 -m POST -T application/json -d "$body" "$url" | awk '/\[202\]/ { print $2 }')
callgrind_control -i on "$relay_pid" >/dev/null
accepted=$(hey -n "$n" -c 8 -m POST -T application/json -d "$body" "$url" | awk '/\[202\]/ { print $2 }')
# Counting stops once every webhook has been delivered (within 60 s).
for _ in $(seq 600); do
  [ "$(delivered)" -ge $((${warmed:-0} + ${accepted:-0})) ] && break
  sleep 0.1
done
callgrind_control -i off "$relay_pid" >/dev/null
got=$(delivered)
kill -INT "$relay_pid"
for _ in $(seq 100); do kill -0 "$relay_pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$relay_pid" 2>/dev/null || true
wait "$relay_pid" 2>/dev/null || true
relay_pid=
if [ "$got" -lt $((${warmed:-0} + ${accepted:-0})) ]; then
  echo "only $got of $((${warmed:-0} + ${accepted:-0})) webhooks answered 202 delivered: not counted" >&2
  exit 1
fi
out=$(ls "$work"/callgrind.out* | head -1)
total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); t = $1 } END { print t }')
[ -n "$total" ] || { echo "callgrind_annotate gave no total for $out" >&2; exit 1; }
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out" "$KEEP/"; fi
echo "relay $(basename "$bin"), journal $journal_mode: ${accepted:-0} of $n webhooks accepted"
echo "instructions (user space) while loaded: $total; per webhook: $((total / n))"
[ "${accepted:-0}" = "$n" ] || { echo "not every webhook was accepted" >&2; exit 1; }
