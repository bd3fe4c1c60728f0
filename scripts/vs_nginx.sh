#!/usr/bin/env bash
# The relay against nginx on the same machine: how many webhooks per second
# dripfeed-relay accepts (answers 202), next to what nginx proxies (204) and
# what a bare hyper server on the relay's own stack answers (202, keeping
# nothing: relay/examples/bare_hyper.rs) with the same load, and at what p99.
#
# Starts, on free loopback ports in a temporary directory:
#   - nginx (worker_processes auto; access_log off): a receiver answering
#     `return 204` and a proxy in front of it (proxy_pass to an upstream with
#     keepalive 64, proxy_http_version 1.1);
#   - the relay (RELAY_BIN), delivering to that same receiver, with a drain
#     rate (1,000,000/s) far above the offered load so that the relay itself,
#     not its throttle, is what is measured.
# Then, for ROUNDS rounds, `hey -z DURATION -c CONC` POSTs the same small JSON
# body to nginx's proxy and to the relay's POST /v1/webhooks/deliver in turn.
# Only 202s count for the relay (204s for nginx); after each relay run the
# script waits until the relay's /metrics show every 202 so far delivered.
# Prints a markdown table per round (accepted/s, the accepted responses' p99,
# the ratio relay/nginx, whether every 202 was delivered) and the min–max of
# each column. Each round's line also says how many webhooks the relay
# delivered while the load ran (accepted/s over a short run can include a
# backlog delivered after it) and the CPU each process spent per 1,000
# requests (from /proc: the relay's, and nginx's as proxy and receiver or as
# receiver alone). Exits non-zero if the relay lost a webhook it answered 202.
#
#   RELAY_BIN=target/release/dripfeed-relay bash scripts/vs_nginx.sh
# Without RELAY_BIN it builds the relay (cargo build --release -p dripfeed-relay).
# Without BARE_BIN it builds the bare server (--example bare_hyper).
# Knobs (environment):
#   ROUNDS=3 DURATION=10s CONC=64
#   JOURNAL=off|on      off: --no-journal; on: --journal-dir in the temp dir
#   RELAY_ARGS="..."    extra flags for the relay(s), split on whitespace
#   RELAY_BIN_B=path    a second relay binary (e.g. the build before a change),
#                       run in the same rounds: nginx, relay A, relay B
#   DELIVER_WAIT=30     seconds to wait for the 202s to be delivered
#   INTAKE_ONLY=1       the relay's intake alone: it delivers to a receiver of
#                       its own (a second bare hyper server) that is stopped
#                       (SIGSTOP) while the relay is loaded and continued
#                       after, so no delivery shares the cores with intake;
#                       the relay's queue holds the run (budget 1 s at
#                       1,000,000/s: keep DURATION × rate under 1,000,000)
#   TMPDIR              where the temporary directory (and the journals) go
# Loopback only and bounded in time: ROUNDS × (3 or 4) × DURATION, plus waits.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
need_tools hey nginx curl

rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
conc=${CONC:-64}
deliver_wait=${DELIVER_WAIT:-30}
journal_mode=${JOURNAL:-off}
case "$journal_mode" in on | off) ;; *) echo "JOURNAL must be on or off, not '$journal_mode'" >&2; exit 2 ;; esac
body='{"event":"order.created","id":12345,"amount":99.5}'

bin_a=${RELAY_BIN:-}
if [ -z "$bin_a" ]; then
  cargo build --release -p dripfeed-relay -q
  bin_a=target/release/dripfeed-relay
fi
bare_bin=${BARE_BIN:-}
if [ -z "$bare_bin" ]; then
  cargo build --release -p dripfeed-relay --example bare_hyper -q
  bare_bin=target/release/examples/bare_hyper
fi
bin_b=${RELAY_BIN_B:-}
for bin in "$bin_a" ${bin_b:+"$bin_b"} "$bare_bin"; do
  [ -x "$bin" ] || { echo "relay binary not found or not executable: $bin" >&2; exit 2; }
done
extra_args=()
if [ -n "${RELAY_ARGS:-}" ]; then read -r -a extra_args <<<"$RELAY_ARGS"; fi

work=$(mktemp -d -t dripfeed-vs-nginx-XXXX)
# nginx's workers run as nobody when started as root: they need to reach
# their temp directories under the prefix.
chmod 755 "$work"
nginx_pid=""
bare_pid=""
held_pid=""
relay_pids=()
hey_pid=""
cleanup() {
  local pid
  if [ -n "$hey_pid" ]; then
    kill -TERM "$hey_pid" 2>/dev/null || true
    wait "$hey_pid" 2>/dev/null || true
  fi
  for pid in "${relay_pids[@]}"; do
    kill -INT "$pid" 2>/dev/null || true
  done
  for pid in "${relay_pids[@]}"; do
    # shutdown drains an (empty) queue; don't hang on it
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  for pid in $bare_pid $held_pid; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$nginx_pid" ]; then
    kill -QUIT "$nginx_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r recv_port proxy_port port_a port_b admin_a admin_b bare_port held_port <<<"$(free_ports 8)"

# --- nginx: the 204 receiver and the keepalive proxy in front of it ---------
# keepalive_requests is raised from its default of 1000 so that no side closes
# a connection mid-run (the relay does not either): hey's 64 connections and
# the pools towards the receiver stay open for the whole run.
{ nginx_conf_head "$work"; cat <<CONF; } >"$work/nginx.conf"
  upstream receiver_upstream {
    server 127.0.0.1:$recv_port;
    keepalive 64;
    keepalive_requests 1000000;
  }
  # the receiver: every webhook (from the proxy or from the relay) gets a 204
  server {
    listen 127.0.0.1:$recv_port;
    location / { return 204; }
  }
  # the proxy hey loads: forwards to the receiver over kept-alive connections
  server {
    listen 127.0.0.1:$proxy_port;
    location / {
      proxy_pass http://receiver_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
nginx -t -q -p "$work" -e "$work/nginx-error.log" -c "$work/nginx.conf"
nginx -p "$work" -e "$work/nginx-error.log" -c "$work/nginx.conf" -g 'daemon off;' \
  >"$work/nginx.out" 2>&1 &
nginx_pid=$!
recv_url="http://127.0.0.1:$recv_port/hooks"
proxy_url="http://127.0.0.1:$proxy_port/hooks"
nginx_ok=""
for _ in $(seq 1 100); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "$body" "$proxy_url")" = 204 ]; then
    nginx_ok=1
    break
  fi
  sleep 0.1
done
if [ -z "$nginx_ok" ]; then
  echo "nginx did not answer 204 through its proxy within 10 s:" >&2
  cat "$work/nginx.out" "$work/nginx-error.log" >&2 2>/dev/null || true
  exit 1
fi

# --- the bare hyper server: the relay's stack, keeping nothing -------------
"$bare_bin" "127.0.0.1:$bare_port" >"$work/bare.log" 2>&1 &
bare_pid=$!
bare_url="http://127.0.0.1:$bare_port/v1/webhooks/deliver"
# answered 202: the bare server (and, INTAKE_ONLY, the held receiver) is up
until_202() {
  local _
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "$body" "$1")" = 202 ] && return 0
    sleep 0.1
  done
  echo "$2 did not answer 202 within 10 s" >&2
  exit 1
}
until_202 "$bare_url" "the bare hyper server ($bare_bin)"

relay_recv_url=$recv_url
budget=(--latency-budget 200ms)
if [ "${INTAKE_ONLY:-0}" = 1 ]; then
  "$bare_bin" "127.0.0.1:$held_port" >"$work/held.log" 2>&1 &
  held_pid=$!
  relay_recv_url="http://127.0.0.1:$held_port/hooks"
  until_202 "$relay_recv_url" "the relay's held receiver"
  # deliveries wait on the stopped receiver: none may time out meanwhile
  budget=(--latency-budget 1s --max-queue-bytes 2000000000 --deliver-timeout 300s)
fi

# --- the relay(s) -----------------------------------------------------------
# start_relay NAME BINARY PORT ADMIN_PORT: a relay with an admin listener
# (round three on) serves /healthz and /metrics there, and delivers to the
# loopback receiver only when allowed; an older one serves them on PORT.
start_relay() {
  local name=$1 bin=$2 port=$3 admin=$4 journal=(--no-journal) newer=() pid
  if [ "$journal_mode" = on ]; then journal=(--journal-dir "$work/journal-$name"); fi
  if "$bin" --help 2>/dev/null | grep -q -- --admin-listen; then
    newer=(--admin-listen "127.0.0.1:$admin" --allow-destination-cidr 127.0.0.0/8)
  else
    admin=$port
  fi
  metrics_ports+=("$admin")
  "$bin" --listen "127.0.0.1:$port" --downstream "$relay_recv_url" \
    --drain-rate 1000000 "${budget[@]}" --max-in-flight 256 \
    --dead-letter-file "$work/dead-letter-$name.jsonl" "${journal[@]}" "${newer[@]}" "${extra_args[@]}" \
    >"$work/relay-$name.log" 2>&1 &
  pid=$!
  relay_pids+=("$pid")
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$admin/healthz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "relay $name ($bin) exited before answering /healthz; its log:" >&2
      cat "$work/relay-$name.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "relay $name ($bin) did not answer /healthz within 30 s; its log:" >&2
  cat "$work/relay-$name.log" >&2
  exit 1
}

# jobs the relay on PORT has delivered: every leaky_bucket_jobs_total series
# with outcome="delivered" (one per destination if it labels them)
delivered() {
  { curl -sf "http://127.0.0.1:$1/metrics" || true; } \
    | awk '/^leaky_bucket_jobs_total[{]/ && /outcome="delivered"/ { s += $NF } END { printf "%.0f\n", s }'
}
# where the undelivered ones are, for a diagnosis: the jobs' other outcomes
# and what is still queued, in flight or waiting for a retry
outcomes() {
  { curl -sf "http://127.0.0.1:$1/metrics" || echo "(no /metrics answer)"; } \
    | awk '
      /^leaky_bucket_jobs_total[{]/ && /outcome="/ {
        match($0, /outcome="[^"]*"/); s[substr($0, RSTART + 9, RLENGTH - 10)] += $NF }
      /^leaky_bucket_(queue_depth|in_flight|retry_wait|delivery_failures_total)[{ ]/ {
        name = $1; sub(/[{].*/, "", name); sub(/^leaky_bucket_/, "", name); s[name] += $NF }
      /^[(]/ { printf "%s  ", $0 }
      END { for (o in s) if (s[o] != 0) printf "%s %.0f  ", o, s[o]; print "" }'
}

names=(a)
bins=("$bin_a")
ports=("$port_a")
admins=("$admin_a")
metrics_ports=()
if [ -n "$bin_b" ]; then
  names+=(b)
  bins+=("$bin_b")
  ports+=("$port_b")
  admins+=("$admin_b")
fi
for i in "${!names[@]}"; do start_relay "${names[$i]}" "${bins[$i]}" "${ports[$i]}" "${admins[$i]}"; done

# --- measuring ----------------------------------------------------------------
# load OUT URL: hey's per-request CSV (status and latency of each response)
# into OUT. CSV rather than hey's summary because the summary's percentiles mix
# every status code, and the p99 wanted is the accepted responses' own.
# hey runs in the background and is waited for so that an interrupt reaches
# the script's trap at once (bash defers traps while a foreground child runs,
# and drops the interrupt if that child, like hey, handles it and exits 0).
load() {
  hey -z "$duration" -c "$conc" -o csv -m POST -T application/json -d "$body" "$2" >"$1" &
  hey_pid=$!
  wait "$hey_pid"
  hey_pid=""
}
# cpu_ms PID...: CPU time (user and system, all threads) the processes have
# used so far, in ms: read before and after a load, it tells what each
# webhook cost each process (hey's own share is the rest of the machine).
cpu_ms() {
  local tick total=0 pid f
  tick=$(getconf CLK_TCK)
  for pid in "$@"; do
    read -r -a f <"/proc/$pid/stat" 2>/dev/null || continue
    total=$((total + f[13] + f[14])) # utime, stime (no spaces in these names)
  done
  echo $((total * 1000 / tick))
}
# nginx's master and its workers (from /proc, or pgrep where it lacks the list)
nginx_all() {
  echo "$nginx_pid" $(cat /proc/"$nginx_pid"/task/*/children 2>/dev/null || pgrep -P "$nginx_pid" || true)
}
# per_k MS COUNT: MS of CPU per 1,000 of COUNT
per_k() { awk -v ms="$1" -v n="$2" 'BEGIN { printf "%.1f", (n > 0 ? ms * 1000 / n : 0) }'; }
# stats CSV CODE: "count seconds per_second p99_ms others" where count is the
# responses with status CODE, seconds the run's length (the last response's
# end), p99 theirs (nearest rank, at hey's 0.1 ms resolution) and others the
# other status codes seen ("-" if none).
stats() {
  awk -F, -v code="$2" '
    NR == 1 { next }
    NF >= 8 {
      end = $8 + $1; if (end > last) last = end
      if ($7 == code) { n++; b[int($1 * 10000 + 0.5)]++ } else { other[$7]++ }
    }
    END {
      p99 = 0
      if (n > 0) {
        want = int(n * 0.99); if (want < n * 0.99) want++
        for (k = 0; seen < want; k++) seen += b[k]
        p99 = (k - 1) / 10
      }
      o = ""; for (c in other) o = o (o == "" ? "" : ",") c "×" other[c]
      if (o == "") o = "-"
      printf "%d %.3f %.0f %.1f %s\n", n, last, (last > 0 ? n / last : 0), p99, o
    }' "$1"
}

echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), $(nproc) cores; hey -z $duration -c $conc; $rounds round(s); journal $journal_mode"
for i in "${!names[@]}"; do
  echo "relay ${names[$i]^^}: ${bins[$i]} on :${ports[$i]}${RELAY_ARGS:+ (extra flags: $RELAY_ARGS)}"
done
echo "receiver $recv_url, nginx proxy $proxy_url"
if [ "$journal_mode" = on ]; then
  # a journal on tmpfs makes its fsyncs free: set TMPDIR to a real disk then
  echo "journals under $work ($(stat -f -c %T "$work" 2>/dev/null || echo "unknown") filesystem; TMPDIR moves them)"
fi
echo

declare -A expected=() # 202s answered so far, per relay
for name in "${names[@]}"; do expected[$name]=0; done
rows=()
lost=0
capped=0
for round in $(seq 1 "$rounds"); do
  n_cpu=$(cpu_ms $(nginx_all))
  load "$work/hey-nginx.csv" "$proxy_url"
  n_cpu=$(($(cpu_ms $(nginx_all)) - n_cpu))
  read -r n_count n_secs n_rate n_p99 n_other <<<"$(stats "$work/hey-nginx.csv" 204)"
  echo "round $round nginx: $n_count 204s in $n_secs s = $n_rate/s, p99 $n_p99 ms; other statuses: $n_other;" \
    "CPU ms per 1,000: nginx (proxy and receiver) $(per_k "$n_cpu" "$n_count")"
  if [ "$n_count" -ge 1000000 ]; then capped=1; fi
  b_cpu=$(cpu_ms "$bare_pid")
  load "$work/hey-bare.csv" "$bare_url"
  b_cpu=$(($(cpu_ms "$bare_pid") - b_cpu))
  read -r b_count b_secs b_rate b_p99 b_other <<<"$(stats "$work/hey-bare.csv" 202)"
  echo "round $round bare hyper: $b_count 202s in $b_secs s = $b_rate/s, p99 $b_p99 ms; other statuses: $b_other;" \
    "CPU ms per 1,000: $(per_k "$b_cpu" "$b_count")"
  if [ "$b_count" -ge 1000000 ]; then capped=1; fi
  row="| $round | $n_rate | $n_p99 | $b_rate | $b_p99 |"
  for i in "${!names[@]}"; do
    name=${names[$i]}
    port=${ports[$i]}
    r_cpu=$(cpu_ms "${relay_pids[$i]}")
    rx_cpu=$(cpu_ms $(nginx_all))
    during=$(delivered "${metrics_ports[$i]}")
    if [ -n "$held_pid" ]; then kill -STOP "$held_pid"; fi
    load "$work/hey-$name.csv" "http://127.0.0.1:$port/v1/webhooks/deliver"
    if [ -n "$held_pid" ]; then
      # the intake's CPU alone: read before the held deliveries run
      intake_cpu=$(($(cpu_ms "${relay_pids[$i]}") - r_cpu))
      kill -CONT "$held_pid"
    fi
    # delivered while the load ran: a relay whose deliveries fall behind
    # its intake builds a backlog that accepted/s alone does not show
    during=$(($(delivered "${metrics_ports[$i]}") - during))
    read -r r_count r_secs r_rate r_p99 r_other <<<"$(stats "$work/hey-$name.csv" 202)"
    if [ "$r_count" -ge 1000000 ]; then capped=1; fi
    expected[$name]=$((expected[$name] + r_count))
    want=${expected[$name]}
    got=$(delivered "${metrics_ports[$i]}")
    for _ in $(seq 1 $((deliver_wait * 5))); do
      [ "$got" -ge "$want" ] && break
      if ! kill -0 "${relay_pids[$i]}" 2>/dev/null; then
        echo "relay ${name^^} has exited; its log:" >&2
        tail -n 20 "$work/relay-$name.log" >&2
        break
      fi
      sleep 0.2
      got=$(delivered "${metrics_ports[$i]}")
    done
    r_cpu=$(($(cpu_ms "${relay_pids[$i]}") - r_cpu))
    if [ -n "$held_pid" ]; then r_cpu=$intake_cpu; fi
    if [ "$r_cpu" -lt 0 ]; then r_cpu=0; fi # the relay exited (said below)
    rx_cpu=$(($(cpu_ms $(nginx_all)) - rx_cpu))
    if [ "$got" -eq "$want" ]; then
      ok=yes
    elif [ "$got" -gt "$want" ]; then
      # accepted, yet hey saw no 202 (a client-side error or timeout)
      ok="yes (+$((got - want)))"
    else
      ok="NO ($((want - got)) lost)"
      lost=1
    fi
    ratio=$(awk -v r="$r_rate" -v n="$n_rate" 'BEGIN { printf "%.2f", (n > 0 ? r / n : 0) }')
    bare_ratio=$(awk -v r="$r_rate" -v n="$b_rate" 'BEGIN { printf "%.2f", (n > 0 ? r / n : 0) }')
    echo "round $round relay ${name^^}: $r_count 202s in $r_secs s = $r_rate/s, p99 $r_p99 ms; other statuses: $r_other;" \
      "delivered $got of $want 202s so far: $ok ($during, $(awk -v d="$during" -v s="$r_secs" 'BEGIN { printf "%.0f", (s > 0 ? d / s : 0) }')/s, while the load ran);" \
      "CPU ms per 1,000: relay $(per_k "$r_cpu" "$r_count"), nginx (receiver) $(per_k "$rx_cpu" "$r_count")"
    if [ "$ok" != yes ]; then echo "  relay ${name^^} outcomes: $(outcomes "${metrics_ports[$i]}")"; fi
    row+=" $r_rate | $r_p99 | $ratio | $bare_ratio | $ok |"
  done
  rows+=("$row")
done

echo
header="| round | nginx accepted/s | nginx p99 ms | bare hyper 202/s | bare hyper p99 ms |"
rule="|---|---|---|---|---|"
for name in "${names[@]}"; do
  N=${name^^}
  header+=" relay $N accepted/s | relay $N p99 ms | $N/nginx | $N/bare hyper | $N 202s delivered |"
  rule+="---|---|---|---|---|"
done
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
# min–max of each column over the rounds; the delivered columns say "all" if
# every round delivered every 202. Columns: 3-4 nginx, 5-6 bare hyper, then
# 5 per relay.
printf '%s\n' "${rows[@]}" | awk -F'|' '
  {
    for (c = 3; c < NF; c++) {
      v = $c; gsub(/^ +| +$/, "", v)
      if (c >= 7 && (c - 7) % 5 == 4) { if (v != "yes") bad[c] = 1; continue }
      if (!(c in lo) || v + 0 < lo[c]) lo[c] = v + 0
      if (!(c in hi) || v + 0 > hi[c]) hi[c] = v + 0
    }
    nf = NF
  }
  END {
    line = "| min–max |"
    for (c = 3; c < nf; c++) {
      # 0 accepted/s, 1 p99, 2 and 3 ratios, 4 delivered
      k = (c < 7) ? (c - 3) % 2 : (c - 7) % 5
      if (k == 4) line = line (c in bad ? " not all |" : " all |")
      else if (k == 0) line = line sprintf(" %.0f–%.0f |", lo[c], hi[c])
      else if (k == 1) line = line sprintf(" %.1f–%.1f |", lo[c], hi[c])
      else line = line sprintf(" %.2f–%.2f |", lo[c], hi[c])
    }
    print line
  }'
echo
if [ "$capped" = 1 ]; then
  echo "warning: a run reached hey's 1,000,000-result cap: counts past it are lost (shorten DURATION)" >&2
fi
if [ "$lost" = 1 ]; then
  echo "FAIL: the relay answered 202 to webhooks it did not deliver (logs: relay-*.log in the temp dir, removed on exit)" >&2
  for name in "${names[@]}"; do
    echo "--- relay ${name^^} log (tail)" >&2
    tail -n 5 "$work/relay-$name.log" >&2
  done
  exit 1
fi
