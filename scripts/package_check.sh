#!/usr/bin/env bash
# Whether both crates are ready to publish: what each package holds (the
# source and what a user needs, no tests, benches, scripts or CI), that
# `cargo publish --dry-run` packs them, that what is packed builds (checked
# with every feature, the relay against the packed library), and that the
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
  stray=$(grep -E '^(tests|benches|scripts|dashboards|fuzz|loom|sdk|\.ci|\.github)/|^docs/' <<<"$list" \
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

# Both packed (cargo publish --dry-run, which also checks what a registry
# would refuse), then checked from what is packed: the two .crate files
# unpacked side by side in a scratch workspace, the relay's dependency on
# the library patched to the unpacked copy, `cargo check` on every feature
# with the workspace's own target directory and lock file, so the
# dependencies clippy compiled are reused (a packed crate missing a file
# its code names fails here as it would for a user).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cargo publish --dry-run --no-verify --allow-dirty -p dripfeed -p dripfeed-relay
cargo package -q --no-verify --allow-dirty -p dripfeed -p dripfeed-relay
mkdir -p "$scratch/packed"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
for pkg in dripfeed dripfeed-relay; do
  tar -xzf "target/package/$pkg-$version.crate" -C "$scratch/packed"
done
cat > "$scratch/packed/Cargo.toml" <<TOML
[workspace]
members = ["dripfeed-$version", "dripfeed-relay-$version"]
resolver = "3"

[patch.crates-io]
dripfeed = { path = "dripfeed-$version" }
TOML
rm -f "$scratch"/packed/*/Cargo.lock
cp Cargo.lock "$scratch/packed/Cargo.lock" 2>/dev/null || true
(cd "$scratch/packed" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" \
  cargo check -q --workspace --all-features)

# The dependency line as the README and the book give it, pasted into a
# project beside a checkout named dripfeed: it resolves.
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
