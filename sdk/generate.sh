#!/usr/bin/env bash
# Generates the SDKs in sdk/ from the relay's OpenAPI documents
# (relay/openapi.json: intake, relay/openapi-admin.json: admin), with
# pinned generators: openapi-python-client 0.29.1 (PyPI) for Python,
# openapi-typescript 7.13.0 (npm) for TypeScript types used with
# openapi-fetch 0.17.0. The hand-written files (sdk/python/dripfeed_webhooks.py,
# sdk/typescript/src/webhooks.ts, src/index.ts, the tests) are not touched.
#
#   bash sdk/generate.sh          # write sdk/python/dripfeed_{intake,admin}, sdk/typescript/src/{intake,admin}.ts
#   bash sdk/generate.sh --check  # fail when what is committed differs from what the documents give
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PYTHON_CLIENT=0.29.1
check=false
[ "${1:-}" = "--check" ] && check=true

venv=$root/target/sdk-venv
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python3 -m venv is missing: install the Debian package python3-venv" >&2
    exit 1
  fi
fi
if ! "$venv/bin/openapi-python-client" --version 2>/dev/null | grep -q "$PYTHON_CLIENT"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "openapi-python-client==$PYTHON_CLIENT"
fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "npm is missing: install the Debian packages nodejs and npm" >&2
    exit 1
  fi
fi
(cd sdk/typescript && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/python" "$out/typescript"
for doc in intake admin; do
  file=relay/openapi.json
  [ $doc = admin ] && file=relay/openapi-admin.json
  "$venv/bin/openapi-python-client" generate --path "$file" \
    --output-path "$out/python/dripfeed_$doc" --meta none \
    --config sdk/python/generator.yml >/dev/null
  sdk/typescript/node_modules/.bin/openapi-typescript "$file" \
    --output "$out/typescript/$doc.ts" >/dev/null 2>&1
done

status=0
for doc in intake admin; do
  if $check; then
    if ! diff -r -q "$out/python/dripfeed_$doc" "sdk/python/dripfeed_$doc" >/dev/null \
      || ! diff -q "$out/typescript/$doc.ts" "sdk/typescript/src/$doc.ts" >/dev/null; then
      echo "sdk/: the $doc SDK differs from what $doc's document gives: run bash sdk/generate.sh and commit" >&2
      diff -r "$out/python/dripfeed_$doc" "sdk/python/dripfeed_$doc" | head -20 >&2 || true
      status=1
    fi
  else
    rm -rf "sdk/python/dripfeed_$doc"
    cp -r "$out/python/dripfeed_$doc" "sdk/python/dripfeed_$doc"
    cp "$out/typescript/$doc.ts" "sdk/typescript/src/$doc.ts"
  fi
done
$check && [ $status = 0 ] && echo "sdk/: up to date with relay/openapi.json and relay/openapi-admin.json"
exit $status
