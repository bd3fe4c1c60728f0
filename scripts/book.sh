#!/usr/bin/env bash
# Builds the book (docs/ → target/book) and checks the documentation users
# read (scripts/docs_check.py: links, words, the runbook's alerts, the
# README's length). Installs mdBook into target/tools when it is not on the
# PATH (a debug build, no server, no watcher, no search index: 50 s where
# a release build took 80, and it builds this book in a fraction of a
# second all the same).
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${CARGO_TARGET_DIR:-$PWD/target}/tools"
mdbook=$(command -v mdbook || true)
if [ -z "$mdbook" ]; then
  mdbook="$tools/bin/mdbook"
  if [ ! -x "$mdbook" ]; then
    echo "-- installing mdbook 0.5.4 into $tools"
    cargo install -q --debug mdbook --version 0.5.4 --locked --no-default-features --root "$tools"
  fi
fi
"$mdbook" build docs
python3 scripts/docs_check.py
