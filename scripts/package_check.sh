#!/usr/bin/env bash
# Whether both crates are ready to publish: what each package holds (the
# source and what a user needs, no tests, benches, scripts or CI), that
# `cargo publish --dry-run` packs them, that every source file their builds
# read is packed, and that the
# dependency line the README and the book give resolves when pasted into a
# project beside a checkout.
#
#   bash scripts/package_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
status=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# What PACKAGE packs (kept in $scratch/PACKAGE.list for the check below):
# nothing a user does not need, and each REQUIRED file.
check_list() { # PACKAGE REQUIRED...
  local pkg=$1
  shift
  cargo package --list --allow-dirty -p "$pkg" 2>/dev/null >"$scratch/$pkg.list"
  local list
  list=$(<"$scratch/$pkg.list")
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
# would refuse), and every source file each crate's builds read is in its
# package: its modules, what include_str! and #[path] name, as the
# dep-info files of the builds in the target directory list them (a packed
# crate missing one fails to build for a user). The dep-info must be newer
# than the crate's sources, else a check of both crates writes it first.
# A file read from the crate's tests, benches or examples, or from outside
# it, is an error unless it is known to be read by unit tests only. (This
# replaced compiling the packed copies, two minutes here: their manifests
# are what `cargo publish --dry-run` reads and checks.)
cargo publish --dry-run --no-verify --allow-dirty -p dripfeed -p dripfeed-relay
target=$(cargo metadata --no-deps --format-version 1 \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
for pkg in dripfeed:dripfeed:. dripfeed-relay:dripfeed_relay:relay; do
  IFS=: read -r name crate dir <<<"$pkg"
  for attempt in 1 2; do
    outcome=0
    python3 - "$target/debug/deps" "$crate" "$dir" "$scratch/$name.list" "$root" <<'PY' || outcome=$?
import glob, os, re, sys
deps, crate, crate_dir, listing, root = sys.argv[1:]
# Read by the relay's unit tests only (#[cfg(test)], relay/src/queue/fleet/redis/tests.rs).
TEST_ONLY = {"tests/support/redis.rs"}
packed = set(open(listing).read().split())
infos = glob.glob(os.path.join(deps, crate + "-*.d"))
newest_source = max(
    os.path.getmtime(os.path.join(d, f))
    for d, _, files in os.walk(os.path.join(crate_dir, "src"))
    for f in files
)
if not infos or max(map(os.path.getmtime, infos)) < newest_source:
    sys.exit(3)  # no dep-info, or older than the sources: build first
read, stray = set(), set()
for info in infos:
    for line in open(info):
        target, sep, names = line.partition(": ")
        if not sep or not target.endswith(".d"):
            continue
        for name in re.split(r"(?<!\\) ", names.strip()):
            name = name.replace("\\ ", " ")
            # Workspace members' files are named from the workspace root.
            name = os.path.normpath(os.path.relpath(name, root) if os.path.isabs(name) else name)
            if name.startswith("..") or name.startswith("target/") or not os.path.isfile(name):
                continue  # outside the checkout (or gone since)
            if os.path.basename(name) == "Cargo.toml":
                continue  # a manifest (its own, or the workspace's it inherits from): cargo packs it normalized
            rel = os.path.relpath(name, crate_dir)
            inside = not rel.startswith("..") and not (crate_dir == "." and rel.startswith("relay/"))
            if not inside or rel.split("/")[0] in ("tests", "benches", "examples"):
                if name not in TEST_ONLY:
                    stray.add(name)
                continue
            read.add(rel)
missing = sorted(read - packed)
for m in missing:
    print(f"{crate}: its build reads {m}, which is not packed", file=sys.stderr)
for m in sorted(stray):
    print(f"{crate}: its build reads {m}, outside what it packs", file=sys.stderr)
if missing or stray:
    sys.exit(1)
print(f"{crate}: the {len(read)} files its builds read are packed")
PY
    if [ $outcome = 3 ] && [ $attempt = 1 ]; then
      cargo check -q -p dripfeed -p dripfeed-relay --all-features
      continue
    fi
    [ $outcome = 3 ] && echo "$crate: no dep-info newer than its sources in $target/debug/deps" >&2
    [ $outcome = 0 ] || status=1
    break
  done
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
