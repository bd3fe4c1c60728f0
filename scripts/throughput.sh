#!/usr/bin/env bash
# The relay's throughput from outside: `hey -c 64` POSTs webhooks at the
# relay for 10 s while a no-op receiver (nginx answering 204) takes the
# deliveries; the drain rate is far above what the machine can do, so the
# relay itself is the bottleneck. Prints requests/s accepted (202) and
# deliveries/s (from the relay's metrics). Loopback only, bounded in time.
# The relay journals (fsynced 202s) in a temporary directory; JOURNAL=off
# runs it with --no-journal.
#   RELAY_BIN=path/to/webhook_relay [JOURNAL=off] bash scripts/throughput.sh
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in hey nginx; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hey nginx >/dev/null
    else
      echo "$tool is missing: install the Debian packages hey and nginx" >&2
      exit 1
    fi
  fi
done

work=$(mktemp -d -t dripfeed-throughput-XXXX)
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  server {
    listen 127.0.0.1:18081;
    location / { return 204; }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
relay_pid=""
cleanup() {
  [ -n "$relay_pid" ] && kill -INT "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null || true
  nginx -c "$work/nginx.conf" -p "$work" -s stop 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --example webhook_relay -q
  bin=./target/release/examples/webhook_relay
fi
journal=(--journal-dir "$work/journal")
if [ "${JOURNAL:-on}" = off ]; then journal=(--no-journal); fi
"$bin" --listen 127.0.0.1:18080 --downstream http://127.0.0.1:18081/hooks \
  --drain-rate 1000000 --latency-budget 100ms --max-in-flight 256 \
  --max-queue-bytes 1073741824 --dead-letter-file "$work/dead.jsonl" "${journal[@]}" >"$work/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 1 50); do curl -sf http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.1; done

delivered() {
  curl -s http://127.0.0.1:18080/metrics \
    | awk '/^leaky_bucket_jobs_total/ && /outcome="delivered"/ {print $2}' | head -1
}
before=$(delivered); before=${before:-0}
start=$(date +%s.%N)
hey -z 10s -c 64 -m POST -T application/json -d '{"event":"order.paid"}' \
  http://127.0.0.1:18080/v1/webhooks/deliver >"$work/hey.txt"
sleep 1 # let the last accepted webhooks go out
after=$(delivered); after=${after:-0}
end=$(date +%s.%N)
accepted=$(awk '/\[202\]/ {print $2}' "$work/hey.txt"); accepted=${accepted:-0}
total=$(awk '/Requests\/sec/ {print $2}' "$work/hey.txt")
echo "hey: $total requests/s in all; status codes:"
sed -n '/Status code distribution/,/^$/p' "$work/hey.txt"
awk -v a="$accepted" -v d0="$before" -v d1="$after" -v s="$start" -v e="$end" 'BEGIN {
  printf "accepted (202): %.0f/s over 10 s; delivered: %.0f/s over %.1f s\n", a / 10, (d1 - d0) / (e - s), e - s
}'
