#!/usr/bin/env bash
# Builds dripfeed-relay's container image (relay/Containerfile, FROM
# scratch: nothing is pulled) with buildah, writes it as a docker archive
# (--format docker: the OCI format drops HEALTHCHECK) with its SBOM beside
# it, and with --check proves it: the image's configuration (user, volume,
# ports, healthcheck, labels) and a webhook served end to end by its
# entrypoint, run from the image's own root (chroot, as its user) against a
# receiver, its HEALTHCHECK command answering 0.
#
#   bash scripts/image.sh            # the release binary (cargo build --release)
#   RELAY_BIN=path bash scripts/image.sh --check
#
# Out: target/image/dripfeed-relay.tar (load it with `docker load` or
# `podman load`) and target/image/dripfeed-relay.cdx.json (CycloneDX: the
# crates compiled in, from cargo metadata, and the Debian packages the
# copied files come from, from dpkg).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/lib.sh
check=false
[ "${1:-}" = "--check" ] && check=true
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' relay/Cargo.toml | head -1)
tag=localhost/dripfeed-relay:$version
out=$root/target/image
store=(--storage-driver vfs --root "$out/storage" --runroot "$out/run")

bin=${RELAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q --release -p dripfeed-relay
  bin=$root/target/release/dripfeed-relay
fi
need_tools buildah
# The certificates file (no command of that name: installed when absent).
[ -f /etc/ssl/certs/ca-certificates.crt ] || need_tools ca-certificates

# The root: the binary (stripped), what ldd names, CA certificates, the user.
rm -rf "$out/ctx"
rootfs=$out/ctx/rootfs
mkdir -p "$rootfs"/{usr/bin,etc/ssl/certs,usr/share/man/man1,var/lib,tmp} "$out/ctx/data"
strip -o "$rootfs/usr/bin/dripfeed-relay" "$bin" 2>/dev/null || cp "$bin" "$rootfs/usr/bin/dripfeed-relay"
libs=$(ldd "$bin" | awk '$3 ~ /^\// {print $3} $1 ~ /ld-linux/ {print $1}')
for lib in $libs; do
  cp -L --parents "$lib" "$rootfs/"
done
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
gzip -9 -n -c relay/dripfeed-relay.1 > "$rootfs/usr/share/man/man1/dripfeed-relay.1.gz"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\ndripfeed:x:65532:65532:dripfeed-relay:/var/lib/dripfeed-relay:/usr/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\ndripfeed:x:65532:\n' > "$rootfs/etc/group"
chmod 0700 "$out/ctx/data"
chmod 1777 "$rootfs/tmp"

buildah "${store[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
buildah "${store[@]}" bud -q --format docker --isolation chroot --layers=false \
  --label "org.opencontainers.image.version=$version" \
  -f relay/Containerfile -t "$tag" "$out/ctx" >/dev/null
rm -f "$out/dripfeed-relay.tar"
buildah "${store[@]}" push -q "$tag" "docker-archive:$out/dripfeed-relay.tar:dripfeed-relay:$version"

# The SBOM: crates (cargo metadata, the relay's normal dependencies on this
# platform) and Debian packages (dpkg -S of each copied library and the
# certificates).
debs=$( (for f in $libs /etc/ssl/certs/ca-certificates.crt; do
  dpkg -S "$(readlink -f "$f")" 2>/dev/null || dpkg -S "$f" 2>/dev/null || true
done
# The certificates file is made by update-ca-certificates, from this package.
echo "ca-certificates: /etc/ssl/certs/ca-certificates.crt") | cut -d: -f1 | sort -u | while read -r p; do dpkg-query -W -f='${Package}\t${Version}\n' "$p"; done)
cargo metadata -q --format-version 1 --filter-platform x86_64-unknown-linux-gnu >"$out/metadata.json"
python3 - "$out/metadata.json" "$version" "$out/dripfeed-relay.cdx.json" <<PY
import json, sys, uuid
meta = json.load(open(sys.argv[1]))
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
pkgs = {p["id"]: p for p in meta["packages"]}
relay = next(p["id"] for p in meta["packages"] if p["name"] == "dripfeed-relay")
seen, todo = set(), [relay]
while todo:
    i = todo.pop()
    if i in seen:
        continue
    seen.add(i)
    for d in nodes[i]["deps"]:
        if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
            todo.append(d["pkg"])
comps = []
for i in sorted(seen, key=lambda i: (pkgs[i]["name"], pkgs[i]["version"])):
    p = pkgs[i]
    if i == relay:
        continue
    comps.append({"type": "library", "name": p["name"], "version": p["version"],
                  "purl": f"pkg:cargo/{p['name']}@{p['version']}",
                  "licenses": [{"expression": p["license"]}] if p.get("license") else []})
for line in """$debs""".splitlines():
    name, ver = line.split("\t")
    comps.append({"type": "library", "name": name, "version": ver,
                  "purl": f"pkg:deb/debian/{name}@{ver}?arch=amd64"})
bom = {"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
       "serialNumber": f"urn:uuid:{uuid.uuid4()}",
       "metadata": {"component": {"type": "container", "name": "dripfeed-relay", "version": sys.argv[2]}},
       "components": comps}
json.dump(bom, open(sys.argv[3], "w"), indent=1)
print(f"sbom: {sum(1 for c in comps if c['purl'].startswith('pkg:cargo'))} crates, "
      f"{sum(1 for c in comps if c['purl'].startswith('pkg:deb'))} Debian packages")
PY
size=$(du -k "$out/dripfeed-relay.tar" | cut -f1)
echo "image: $tag, $out/dripfeed-relay.tar ($((size / 1024)) MiB)"
$check || exit 0

# The image's configuration.
buildah "${store[@]}" inspect --type image "$tag" >"$out/config.json"
python3 - "$version" "$out/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
d = c.get("Docker", {}).get("config", {})
problems = []
if d.get("User") != "65532:65532": problems.append(f"user {d.get('User')!r}")
if "/var/lib/dripfeed-relay" not in (d.get("Volumes") or {}): problems.append("no volume")
if set(d.get("ExposedPorts") or {}) != {"8080/tcp", "8090/tcp"}: problems.append(f"ports {d.get('ExposedPorts')}")
hc = d.get("Healthcheck") or {}
if hc.get("Test") != ["CMD", "/usr/bin/dripfeed-relay", "health"]: problems.append(f"healthcheck {hc}")
labels = d.get("Labels") or {}
if labels.get("org.opencontainers.image.version") != sys.argv[1]: problems.append(f"labels {labels}")
if d.get("Entrypoint") != ["/usr/bin/dripfeed-relay"]: problems.append(f"entrypoint {d.get('Entrypoint')}")
if problems:
    sys.exit("image configuration: " + "; ".join(problems))
print("image configuration: user, volume, ports, healthcheck, labels, entrypoint as set")
PY

# Its entrypoint from its own root, as its user, against a receiver.
chroot=$(command -v chroot)
work=$(mktemp -d)
container=$(buildah "${store[@]}" from -q "$tag")
mnt=$(buildah "${store[@]}" mount "$container")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  buildah "${store[@]}" umount "$container" >/dev/null 2>&1 || true
  buildah "${store[@]}" rm "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
python3 - "$work/port" "$work/got" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        open(sys.argv[2], "ab").write(body + b"\n")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
# The image's environment, listening on loopback ports of its own here.
env -i PATH=/usr/bin DRIPFEED_DATA_DIR=/var/lib/dripfeed-relay SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  DRIPFEED_LISTEN=127.0.0.1:0 DRIPFEED_ADMIN_LISTEN=127.0.0.1:0 \
  DRIPFEED_DOWNSTREAM="http://127.0.0.1:$port/hook" DRIPFEED_ALLOW_DESTINATION_CIDRS=127.0.0.0/8 \
  "$chroot" --userspec=65532:65532 "$mnt" /usr/bin/dripfeed-relay >"$work/out" 2>"$work/err" &
pids+=($!)
addresses=$(relay_addresses "$work/out" "$work/err")
read -r intake admin <<<"$addresses"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
  --data '{"from":"the image"}' "http://$intake/v1/webhooks/deliver")
[ "$code" = 202 ] || { echo "the image's relay answered $code" >&2; cat "$work/err" >&2; exit 1; }
for _ in $(seq 100); do grep -q 'the image' "$work/got" 2>/dev/null && break; sleep 0.1; done
grep -q 'the image' "$work/got" || { echo "the receiver got nothing from the image's relay" >&2; cat "$work/err" >&2; exit 1; }
env -i PATH=/usr/bin DRIPFEED_ADMIN_LISTEN="$admin" "$chroot" --userspec=65532:65532 "$mnt" /usr/bin/dripfeed-relay health \
  || { echo "the HEALTHCHECK command failed" >&2; exit 1; }
# Read-only root friendly: nothing written outside the volume.
written=$(find "$mnt" -xdev -newer "$work/port" -not -path "$mnt/var/lib/dripfeed-relay*" | head -5)
[ -z "$written" ] || { echo "the relay wrote outside its volume: $written" >&2; exit 1; }
echo "image: served a webhook end to end from its own root as 65532, writing only in its volume; its HEALTHCHECK answers 0"
