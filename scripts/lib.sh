# Shared by the scripts that start relays and install tools (the
# benchmarks, fuzz_api.sh, image.sh, sdk/test.sh): sourced, not run.

# relay_addresses OUT ERR: waits (10 s at most) for the relay whose stdout
# is the file OUT to print its listeners, then prints "INTAKE ADMIN"
# (host:port each); a relay that printed neither has OUT and ERR shown on
# stderr, and the function fails.
relay_addresses() {
  local intake admin
  for _ in $(seq 100); do grep -q '^admin on http://' "$1" && break; sleep 0.1; done
  intake=$(sed -n 's|^webhook relay on http://\([^:]*:[0-9]*\):.*|\1|p' "$1")
  admin=$(sed -n 's|^admin on http://\([^:]*:[0-9]*\):.*|\1|p' "$1")
  if [ -z "$intake" ] || [ -z "$admin" ]; then
    cat "$1" "$2" >&2
    return 1
  fi
  echo "$intake $admin"
}

# need_tools PACKAGE...: each tool (a Debian package of the same name, but
# redis-server's CLI comes with it) on PATH, installed with apt-get when
# missing and running as root; otherwise a message and exit 1.
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 && continue
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
      return
    fi
    echo "$tool is missing: install the Debian packages $*" >&2
    exit 1
  done
}

# free_ports N: N free loopback ports, held open together while chosen so
# they differ.
free_ports() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
  else # pick from a high range, skipping ports something answers on
    local ports=() p
    while [ "${#ports[@]}" -lt "$1" ]; do
      p=$((20000 + RANDOM % 40000))
      case " ${ports[*]} " in *" $p "*) continue ;; esac
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then ports+=("$p"); fi
    done
    echo "${ports[*]}"
  fi
}

# nginx_conf_head DIR: the start of an nginx.conf whose pid, log and temp
# files live in DIR (worker_processes auto; access_log off; connections
# kept open for the whole run), up to inside `http {`: the caller adds its
# servers and the closing brace.
nginx_conf_head() {
  cat <<CONF
worker_processes auto;
worker_rlimit_nofile 16384;
pid $1/nginx.pid;
error_log $1/nginx-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $1/client_body_temp;
  proxy_temp_path $1/proxy_temp;
  fastcgi_temp_path $1/fastcgi_temp;
  uwsgi_temp_path $1/uwsgi_temp;
  scgi_temp_path $1/scgi_temp;
CONF
}
