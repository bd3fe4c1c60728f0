#!/usr/bin/env bash
# The shared queue (--queue redis) against one relay with its local journal,
# in one run: webhooks accepted per second (202s), delivered per second while
# the load runs, the 202s' p99, and the Redis round trips per accepted webhook
# by purpose (dripfeed_redis_round_trips_total).
#
# Starts, on free loopback ports in a temporary directory:
#   - nginx answering `return 204` (the receiver every relay delivers to);
#   - redis-server with `appendonly yes` and `appendfsync $REDIS_FSYNC`
#     (default always: a 202 is on Redis's disk), no RDB snapshots;
#   - "local": one relay with --journal-dir (fsynced 202s);
#   - "fleet1": one relay with --queue redis (Redis database 1);
#   - "fleet3": three relays with --queue redis sharing Redis database 2.
# Every relay drains at 1,000,000/s (far above the load) so the intake and the
# queue are measured, not the throttle. For ROUNDS rounds, in turn: hey -z
# DURATION -c CONC on "local", on "fleet1", and CONC/3 connections on each
# relay of "fleet3" at once (the sum is the fleet's). After each run the
# script waits until every 202 has been delivered (the relays' /metrics).
#
#   RELAY_BIN=target/release/dripfeed-relay bash scripts/fleet_bench.sh
# Knobs: ROUNDS=3 DURATION=10s CONC=63 REDIS_FSYNC=always|everysec
#        DELIVER_WAIT=60 TMPDIR (where the journals and the AOF go)
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
need_tools hey nginx curl redis-server

rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
conc=${CONC:-63}
fsync=${REDIS_FSYNC:-always}
deliver_wait=${DELIVER_WAIT:-60}
body='{"event":"order.created","id":12345,"amount":99.5}'
bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -p dripfeed-relay -q
  bin=target/release/dripfeed-relay
fi

work=$(mktemp -d -t dripfeed-fleet-XXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r recv_port redis_port p0 p1 p2 p3 p4 a0 a1 a2 a3 a4 <<<"$(free_ports 12)"

{ nginx_conf_head "$work"; cat <<CONF; } >"$work/nginx.conf"
  server { listen 127.0.0.1:$recv_port; location / { return 204; } }
}
CONF
nginx -p "$work" -e "$work/nginx-error.log" -c "$work/nginx.conf" -g 'daemon off;' >"$work/nginx.out" 2>&1 &
pids+=($!)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly yes \
  --appendfsync "$fsync" --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
recv_url="http://127.0.0.1:$recv_port/hooks"

# start NAME PORT ADMIN ARGS...: a relay delivering to the receiver.
start() {
  local name=$1 port=$2 admin=$3 pid
  shift 3
  "$bin" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --allow-destination-cidr 127.0.0.0/8 --destination "hooks=$recv_url" \
    --drain-rate 1000000 --latency-budget 200ms --max-in-flight 256 \
    --dead-letter-file "$work/dead-letter-$name.jsonl" "$@" >"$work/relay-$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$admin/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$work/relay-$name.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "relay $name did not start" >&2
  exit 1
}
redis_url() { echo "redis://127.0.0.1:$redis_port/$1"; }
start local "$p0" "$a0" --journal-dir "$work/journal-local"
start fleet1 "$p1" "$a1" --queue redis --redis "$(redis_url 1)" --node-name f1 --journal-dir "$work/journal-f1"
start fleet3-a "$p2" "$a2" --queue redis --redis "$(redis_url 2)" --node-name a --journal-dir "$work/journal-a"
start fleet3-b "$p3" "$a3" --queue redis --redis "$(redis_url 2)" --node-name b --journal-dir "$work/journal-b"
start fleet3-c "$p4" "$a4" --queue redis --redis "$(redis_url 2)" --node-name c --journal-dir "$work/journal-c"

# metric NAME_REGEX ADMIN...: the sum of the matching series over the relays.
metric() {
  local re=$1 admin
  shift
  for admin in "$@"; do curl -sf "http://127.0.0.1:$admin/metrics" || true; done \
    | awk -v re="$re" '$0 ~ re { s += $NF } END { printf "%.0f\n", s }'
}
delivered() { metric '^leaky_bucket_jobs_total[{].*outcome="delivered"' "$@"; }
trips() { metric "^dripfeed_redis_round_trips_total[{]purpose=\"$1\"" "${@:2}"; }
purposes=(queue_admit queue_claim queue_ack queue_upkeep permits)

# load CSV URL CONC, in the background (waited for by the caller).
load() { hey -z "$duration" -c "$3" -o csv -m POST -T application/json -d "$body" "$2" >"$1"; }
# count_p99 CSV...: "202s seconds p99_ms" over the files (hey's per-request CSV).
count_p99() {
  awk -F, 'FNR == 1 { next }
    NF >= 8 { end = $8 + $1; if (end > last) last = end
      if ($7 == 202) { n++; b[int($1 * 10000 + 0.5)]++ } }
    END { p99 = 0
      if (n > 0) { want = int(n * 0.99); if (want < n * 0.99) want++
        for (k = 0; seen < want; k++) seen += b[k]; p99 = (k - 1) / 10 }
      printf "%d %.3f %.1f\n", n, last, p99 }' "$@"
}

echo "$(nproc) cores; redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') appendfsync $fsync; hey -z $duration, $conc connections; $rounds round(s)"
echo
echo "| round | setup | accepted/s | delivered/s during the load | 202 p99 ms | round trips per webhook: ${purposes[*]} |"
echo "|---|---|---|---|---|---|"
declare -A before=()
for round in $(seq 1 "$rounds"); do
  for setup in local fleet1 fleet3; do
    case $setup in
      local) ports=("$p0"); admins=("$a0"); each=$conc ;;
      fleet1) ports=("$p1"); admins=("$a1"); each=$conc ;;
      fleet3) ports=("$p2" "$p3" "$p4"); admins=("$a2" "$a3" "$a4"); each=$((conc / 3)) ;;
    esac
    d0=$(delivered "${admins[@]}")
    for p in "${purposes[@]}"; do before[$p]=$(trips "$p" "${admins[@]}"); done
    started=$(date +%s.%N)
    hey_pids=()
    for i in "${!ports[@]}"; do
      load "$work/hey-$setup-$i.csv" "http://127.0.0.1:${ports[$i]}/v1/webhooks/deliver" "$each" &
      hey_pids+=($!)
    done
    wait "${hey_pids[@]}"
    ended=$(date +%s.%N)
    d1=$(delivered "${admins[@]}")
    read -r n secs p99 <<<"$(count_p99 "$work"/hey-"$setup"-*.csv)"
    want=$((d0 + n))
    for _ in $(seq 1 $((deliver_wait * 5))); do
      [ "$(delivered "${admins[@]}")" -ge "$want" ] && break
      sleep 0.2
    done
    got=$(delivered "${admins[@]}")
    per=""
    for p in "${purposes[@]}"; do
      after=$(trips "$p" "${admins[@]}")
      per="$per $(awk -v a="$after" -v b="${before[$p]}" -v n="$n" 'BEGIN { printf "%.3f", (n > 0 ? (a - b) / n : 0) }')"
    done
    rate=$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
    drate=$(awk -v a="$d1" -v b="$d0" -v s0="$started" -v s1="$ended" 'BEGIN { printf "%.0f", (a - b) / (s1 - s0) }')
    lost=""
    [ "$got" -lt "$want" ] && lost=" ($((want - got)) not delivered within ${deliver_wait}s)"
    echo "| $round | $setup | $rate | $drate | $p99 |$per |$lost"
    rm -f "$work"/hey-"$setup"-*.csv
  done
done
