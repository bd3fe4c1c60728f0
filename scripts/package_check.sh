#!/usr/bin/env bash
# Whether both crates are ready to publish: what each package holds (the
# source and what a user needs, no tests, benches, scripts or CI), that
# `cargo publish --dry-run` packs them, that every file their builds read
# is packed, and that the
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
# would refuse), and every file the compiler reads to build each crate is
# in its package: the sources its modules, include_str! and #[path] name,
# as the dep-info files of the builds in the target directory list them
# (a packed crate missing one fails for a user as it would here; this
# reads what clippy's and the tests' builds wrote, where compiling the
# packed copies again took two minutes). Files a build reads from the
# crate's tests, benches or examples, or from outside it, are test-only.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cargo publish --dry-run --no-verify --allow-dirty -p dripfeed -p dripfeed-relay
deps="${CARGO_TARGET_DIR:-$root/target}/debug/deps"
if ! ls "$deps"/dripfeed-*.d "$deps"/dripfeed_relay-*.d >/dev/null 2>&1; then
  cargo check -q -p dripfeed -p dripfeed-relay --all-features
fi
for pkg in dripfeed:dripfeed:. dripfeed-relay:dripfeed_relay:relay; do
  IFS=: read -r name crate dir <<<"$pkg"
  cargo package --list --allow-dirty -p "$name" 2>/dev/null >"$scratch/list"
  if ! python3 - "$deps" "$crate" "$dir" "$scratch/list" <<'PY'; then
import glob, os, re, sys
deps, crate, crate_dir, listing = sys.argv[1:]
packed = set(open(listing).read().split())
read = set()
for d in glob.glob(os.path.join(deps, crate + "-*.d")):
    for line in open(d):
        target, sep, names = line.partition(": ")
        if not sep or not target.endswith(".d"):
            continue
        for name in re.split(r"(?<!\\) ", names.strip()):
            name = name.replace("\\ ", " ")
            # Workspace members' files are named from the workspace root.
            if os.path.isabs(name) or not os.path.isfile(name):
                continue
            rel = os.path.relpath(name, crate_dir)
            if rel.startswith("..") or rel.split("/")[0] in ("tests", "benches", "examples", "target", "relay"):
                continue
            read.add(rel)
if not read:
    sys.exit(f"no dep-info for {crate} in {deps}")
missing = sorted(read - packed)
for m in missing:
    print(f"{crate}: its build reads {m}, which is not packed", file=sys.stderr)
print(f"{crate}: the {len(read)} files its builds read are packed")
sys.exit(1 if missing else 0)
PY
    status=1
  fi
done

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
