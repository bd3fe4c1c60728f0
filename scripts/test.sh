#!/usr/bin/env bash
# Runs dripfeed's tests on a fresh machine: installs what they need, then `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-features "$@"
