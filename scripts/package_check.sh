#!/usr/bin/env bash
# Whether both crates are ready to publish: what each package holds (the
# source and what a user needs, no tests, benches, scripts or CI), that
# `cargo publish --dry-run` packs and builds them together, and that the
# dependency line the README and the book give resolves when pasted into a
# project beside a checkout.
#
#   bash scripts/package_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
status=0

check_list() { # PACKAGE REQUIRED...
  local pkg=$1
  shift
  local list
  list=$(cargo package --list --allow-dirty -p "$pkg" 2>/dev/null)
  local stray
  stray=$(grep -E '^(tests|benches|scripts|dashboards|fuzz|loom|\.ci|\.github)/|^docs/' <<<"$list" \
    | grep -vE '^docs/src/library/guide\.md$|^docs/src/quick-start\.md$' || true)
  if [ -n "$stray" ]; then
    echo "$pkg packs files a user does not need:" >&2
    echo "$stray" >&2
    status=1
  fi
  for need in "$@"; do
    if ! grep -qxF "$need" <<<"$list"; then
      echo "$pkg does not pack $need" >&2
      status=1
    fi
  done
  echo "$pkg: $(wc -l <<<"$list") files"
}
check_list dripfeed src/lib.rs README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE \
  docs/src/library/guide.md docs/src/quick-start.md
check_list dripfeed-relay src/main.rs README.md relay.example.toml dripfeed-relay.service \
  openapi.json openapi-admin.json

# Both packed, and built from what is packed (cargo packs a workspace's
# crates together, the relay against the library's package). Cargo
# unpacks the library's package from a local overlay registry into
# $CARGO_HOME/registry/src/-<hash>/ once per version and reuses it, so an
# earlier run's library (same version, older code) would be built instead:
# those unpacked copies go first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/dripfeed-[0-9]* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/dripfeed-relay-[0-9]*
cargo publish --dry-run --allow-dirty -p dripfeed -p dripfeed-relay

# The dependency line as the README and the book give it, pasted into a
# project beside a checkout named dripfeed: it resolves.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ln -s "$root" "$scratch/dripfeed"
for page in README.md docs/src/quick-start.md docs/src/library/guide.md; do
  mkdir -p "$scratch/app/src"
  python3 - "$page" > "$scratch/app/Cargo.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "dripfeed" in b)
print('[package]\nname = "app"\nversion = "0.1.0"\nedition = "2024"\n\n[workspace]\n')
print(block)
PY
  echo 'fn main() {}' > "$scratch/app/src/main.rs"
  if ! (cd "$scratch/app" && cargo metadata --format-version 1 >/dev/null 2>"$scratch/err"); then
    echo "$page: its dependency line does not resolve beside a checkout:" >&2
    cat "$scratch/err" >&2
    status=1
  fi
  rm -rf "$scratch/app"
done
exit $status
