#!/usr/bin/env bash
# Checks relay/dripfeed-relay.service without starting it (no systemd as PID 1
# needed: it runs in a container): `systemd-analyze verify` must pass and say
# nothing about the unit, and `systemd-analyze security --offline` must rate
# its exposure 2.0 or less.
#
#   RELAY_BIN=target/debug/dripfeed-relay bash scripts/systemd_check.sh
#
# verify insists that ExecStart's command exists, so the relay (RELAY_BIN,
# default the debug build) is installed there, /usr/local/bin/dripfeed-relay;
# and systemd is installed when systemd-analyze is missing. Both need root
# (or sudo): run it in CI or on a throwaway machine. The files the unit loads
# (relay.toml, the TLS credentials) are only read at start: verify does not
# look for them, so none are made.
set -euo pipefail
cd "$(dirname "$0")/.."

unit=relay/dripfeed-relay.service
bin=${RELAY_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/dripfeed-relay}
exec_path=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
# systemd-analyze's threshold counts tenths of the exposure it prints: 20 = 2.0.
threshold=20

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "systemd_check.sh needs root or sudo" >&2; exit 1; }
  sudo=sudo
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
[ -x "$bin" ] || { echo "no relay at $bin: build it (cargo build -p dripfeed-relay) or set RELAY_BIN" >&2; exit 1; }
cmp -s "$bin" "$exec_path" || $sudo install -m 0755 "$bin" "$exec_path"

systemd-analyze --version | head -1
# verify exits 0 on unknown keys and bad values (it ignores them, as systemd
# would): any line naming the unit fails the check.
echo "-- systemd-analyze verify $unit"
status=0
out=$(systemd-analyze verify --man=no "$unit" 2>&1) || status=$?
[ -z "$out" ] || printf '%s\n' "$out"
if [ $status -ne 0 ] || grep -qF "$(basename "$unit")" <<<"$out"; then
  echo "systemd-analyze verify: $unit has errors or warnings (exit $status)" >&2
  exit 1
fi

# What is still exposed (✗, with its weight), then the overall level; the exit
# status is non-zero above the threshold.
echo "-- systemd-analyze security --offline=true --threshold=$threshold $unit"
status=0
out=$(systemd-analyze security --offline=true --threshold=$threshold "$unit" 2>&1) || status=$?
grep -E '^✗|Overall exposure' <<<"$out" || printf '%s\n' "$out"
if [ $status -ne 0 ]; then
  echo "systemd-analyze security: $unit is exposed above $((threshold / 10)).$((threshold % 10)) (exit $status)" >&2
  exit 1
fi
