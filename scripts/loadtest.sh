#!/usr/bin/env bash
# The classic burst from outside: 1,000 requests/s for 5 s at the webhook
# relay with `hey`, while sampling Retry-After and the queue depth.
# Starts its own relay (release build) unless RELAY is set, e.g.
#   RELAY=http://127.0.0.1:8080 bash scripts/loadtest.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hey >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hey >/dev/null
  else
    echo "hey is missing: install the Debian package hey" >&2
    exit 1
  fi
fi

relay_pid=""
if [ -z "${RELAY:-}" ]; then
  cargo build --release --example webhook_relay -q
  dl=$(mktemp -t dripfeed-dl-XXXX.jsonl)
  ./target/release/examples/webhook_relay --dead-letter-file "$dl" >/tmp/dripfeed-relay.log 2>&1 &
  relay_pid=$!
  trap '[ -n "$relay_pid" ] && kill -INT "$relay_pid" 2>/dev/null; wait "$relay_pid" 2>/dev/null || true' EXIT
  RELAY=http://127.0.0.1:8080
  for _ in $(seq 1 50); do curl -sf "$RELAY/healthz" >/dev/null && break; sleep 0.1; done
fi
url="$RELAY/v1/webhooks/deliver"
rss() { [ -n "$relay_pid" ] && awk '/VmRSS/ {print $2" kB"}' "/proc/$relay_pid/status" || echo "n/a"; }
depth() { curl -s "$RELAY/metrics" | awk '/^leaky_bucket_queue_depth/ {print $2}' | head -1; }

echo "relay RSS before: $(rss)"
samples=$(mktemp)
( # sample depth and Retry-After while the burst runs
  peak=0
  for _ in $(seq 1 25); do
    sleep 0.2
    d=$(depth); d=${d%.*}; [ -n "$d" ] && [ "$d" -gt "$peak" ] && peak=$d
    # hey's workers fire in volleys: probe until one lands on a full queue
    for _ in $(seq 1 20); do
      answer=$(curl -s -o /dev/null -D - -X POST -d '{}' "$url" | tr -d '\r')
      ra=$(echo "$answer" | awk -F': ' 'tolower($1)=="retry-after" {print $2}')
      if [ -n "$ra" ]; then echo "retry-after $ra" >>"$samples"; break; fi
    done
  done
  echo "peak $peak" >>"$samples"
) &
sampler=$!
# 50 workers × 20 requests/s each = 1,000 requests/s, for 5 s
hey -z 5s -c 50 -q 20 -m POST -T application/json -d '{"event":"order.paid"}' "$url" \
  | sed -n '/Status code distribution/,/^$/p'
wait "$sampler"
echo "Retry-After samples while full (s): $(awk '/retry-after/ {printf "%s ", $2}' "$samples")"
echo "peak queue depth (metrics gauge): $(awk '/peak/ {print $2}' "$samples")"
sleep 3 # let the queue drain
echo "relay RSS after: $(rss)"
rm -f "$samples"
