"""Many endpoints on one relay, measured as a team sending webhooks to its
customers would meet them (scripts/scale_bench.sh runs it).

For each count N: a relay (release build, journal on, destinations at 5/s)
on free loopback ports in a temporary directory, then

  - create: N destinations through the admin API (PUT each) from 8
    concurrent clients: seconds and creations per second;
  - idle: the relay's RSS per idle destination (RSS IDLE_SETTLE seconds,
    default 2, after creating them, less RSS before, over N), and the size
    of /metrics;
  - restart: SIGTERM, start again on the same data: seconds until /readyz
    answers 200 and every destination is listed;
  - work: min(N, WORK) destinations at 1/s each get 2 webhooks each, at a
    receiver that answers at once: RSS per destination while they drain,
    and RSS a minute after the last delivery (back near the idle figure?);
  - pacing: the most any destination received in one second;
  - fan-out: an application with 1, 100 and 1,000 endpoints subscribed,
    20 events posted to each, 250 ms apart (so no endpoint waits for its
    rate): the 202's p99, and the p99 of the time from the post to the
    last copy's receipt; then CLIENTS clients posting events back to back
    for BURST seconds: events answered 202 per second (their copies past
    what the endpoints' queues hold are dead-lettered as overflow).

Prints one markdown table. Loopback only; each step bounded in time.

  python3 scripts/scale_bench.py BIN [N ...]      (default N: 1000 10000)
  WORK=2000 CLIENTS=8 QUEUE=local|redis REDIS=redis://127.0.0.1:PORT/
  KEEP=1 keeps each run's directory (the relay's logs)
"""
import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict

BIN = sys.argv[1]
COUNTS = [int(n) for n in sys.argv[2:]] or [1000, 10000]
CLIENTS = int(os.environ.get("CLIENTS", "8"))
WORK = int(os.environ.get("WORK", "2000"))
QUEUE = os.environ.get("QUEUE", "local")
REDIS = os.environ.get("REDIS", "")
SETTLE = int(os.environ.get("SETTLE", "60"))
IDLE_SETTLE = float(os.environ.get("IDLE_SETTLE", "2"))
BURST = float(os.environ.get("BURST", "3"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Receiver(http.server.BaseHTTPRequestHandler):
    """Answers 204 and counts each destination's arrivals per second."""

    arrivals = defaultdict(lambda: defaultdict(int))
    by_group = defaultdict(int)
    total = 0
    lock = threading.Lock()
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        name = self.path.rsplit("/", 1)[-1]
        second = int(time.monotonic())
        with Receiver.lock:
            Receiver.arrivals[name][second] += 1
            Receiver.by_group[name.split("-", 1)[0]] += 1
            Receiver.total += 1
        self.send_response(204)
        self.send_header("content-length", "0")
        if os.environ.get("CLOSE"):
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    # A fan-out to 1,000 endpoints opens up to 1,000 connections at once.
    request_queue_size = 4096


def start_receiver():
    server = Server(("127.0.0.1", 0), Receiver)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def start_relay(work, n, rx_port):
    args = [
        BIN,
        "--listen", "127.0.0.1:0",
        "--admin-listen", "127.0.0.1:0",
        "--allow-destination-cidr", "127.0.0.0/8",
        "--data-dir", work,
        "--drain-rate", "5",
        "--max-destinations", str(n + 1200),
        "--status-line=false",
        "--retries", os.environ.get("RETRIES", "0"),
        # A relay starts with one destination; the rest come through the API.
        "--destination", f"seed=http://127.0.0.1:{rx_port}/d/seed",
    ]
    if QUEUE == "redis":
        args += ["--queue", "redis", "--redis", REDIS]
    out = open(os.path.join(work, "relay.out"), "a")
    err = open(os.path.join(work, "relay.err"), "a")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    intake = admin = None
    deadline = time.time() + 300
    while time.time() < deadline and (intake is None or admin is None):
        line = proc.stdout.readline()
        if not line:
            break
        out.write(line)
        if line.startswith("webhook relay on http://"):
            intake = line.split("http://")[1].split(":", 2)
            intake = f"{intake[0]}:{intake[1]}"
        if line.startswith("admin on http://"):
            admin = line.split("http://")[1].split(":", 2)
            admin = f"{admin[0]}:{admin[1]}"
    threading.Thread(target=lambda: [out.write(l) for l in proc.stdout], daemon=True).start()
    if intake is None:
        raise SystemExit(f"the relay did not start: see {work}/relay.err")
    return proc, intake, admin


def connection(addr):
    host, port = addr.split(":")
    return http.client.HTTPConnection(host, int(port), timeout=60)


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, data


def create(admin, n, rx_port):
    """PUTs n destinations from CLIENTS threads: seconds taken."""
    failures = []

    def worker(k):
        conn = connection(admin)
        for i in range(k, n, CLIENTS):
            body = json.dumps({"url": f"http://127.0.0.1:{rx_port}/d/e{i}", "rate": 1})
            status, data = request(conn, "PUT", f"/v1/destinations/e{i}", body,
                                   {"content-type": "application/json"})
            if status not in (200, 201):
                failures.append((i, status, data[:200]))

    began = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - began
    if failures:
        print(f"  {len(failures)} PUTs failed, the first: {failures[0]}", file=sys.stderr)
    return took


def ready(admin, n, limit=300):
    """Seconds until /readyz answers 200 (and n destinations are held)."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        try:
            conn = connection(admin)
            status, _ = request(conn, "GET", "/readyz")
            if status == 200:
                return time.monotonic() - began
        except OSError:
            pass
        time.sleep(0.05)
    return float("nan")


def metrics_bytes(admin):
    """The size of /metrics (and how long the scrape took, on stderr)."""
    conn = connection(admin)
    began = time.monotonic()
    _, data = request(conn, "GET", "/metrics")
    print(f"  /metrics: {len(data):,} bytes in {(time.monotonic() - began) * 1000:.0f} ms",
          file=sys.stderr)
    return len(data)


def heap_bytes(admin):
    """dripfeed_relay_heap_bytes, with a relay built with heap-count (else 0)."""
    conn = connection(admin)
    _, data = request(conn, "GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith("dripfeed_relay_heap_bytes "):
            return float(line.split()[1])
    return 0.0


def post_work(intake, names):
    """Two webhooks for each of `names`, from CLIENTS threads."""

    def worker(k):
        conn = connection(intake)
        for i in range(k, len(names), CLIENTS):
            for _ in range(2):
                request(conn, "POST", "/v1/webhooks/deliver", b'{"n":1}',
                        {"content-type": "application/json", "x-destination": names[i]})

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, len(values) * 99 // 100)]


def fan_out(intake, admin, rx_port, events=20):
    """For K in 1, 100, 1000: an application with K endpoints taking every
    type, EVENTS events posted one after another: (K, 202 p99 in ms, p99 ms
    from the post to the last copy's receipt, events taken per second by
    CLIENTS clients posting back to back for BURST seconds)."""
    rows = []
    for k in (1, 100, 1000):
        conn = connection(admin)  # the last one may have been idle too long
        app = f"fan{k}"
        request(conn, "PUT", f"/v1/applications/{app}", b"{}", {"content-type": "application/json"})
        for i in range(k):
            body = json.dumps({"url": f"http://127.0.0.1:{rx_port}/d/{app}-{i}"})
            status, data = request(conn, "PUT", f"/v1/applications/{app}/endpoints/{app}-{i}", body,
                                   {"content-type": "application/json"})
            if status not in (200, 201):
                print(f"  fan-out endpoint {i}: {status} {data[:200]}", file=sys.stderr)
        post = connection(intake)
        answers, lasts = [], []
        for e in range(events):
            with Receiver.lock:
                before = Receiver.by_group[app]
            time.sleep(0.25)
            body = json.dumps({"type": "bench.event", "payload": {"e": e}})
            headers = {"content-type": "application/json"}
            began = time.monotonic()
            try:
                status, data = request(post, "POST", f"/v1/applications/{app}/events", body, headers)
            except (OSError, http.client.HTTPException):
                post = connection(intake)  # an idle connection the relay closed
                began = time.monotonic()
                status, data = request(post, "POST", f"/v1/applications/{app}/events", body, headers)
            answers.append(time.monotonic() - began)
            if status != 202:
                print(f"  fan-out event: {status} {data[:200]}", file=sys.stderr)
                continue
            deadline = began + 30
            while Receiver.by_group[app] < before + k and time.monotonic() < deadline:
                time.sleep(0.001)
            lasts.append(time.monotonic() - began)
        rows.append((k, p99(answers) * 1000, p99(lasts) * 1000 if lasts else float("nan"),
                     burst(intake, app)))
    return rows


def burst(intake, app):
    """Events taken (202) per second by CLIENTS clients posting `app`
    events back to back for BURST seconds."""
    taken = [0] * CLIENTS
    body = json.dumps({"type": "bench.burst", "payload": {"n": 1}})
    headers = {"content-type": "application/json"}
    end = time.monotonic() + BURST

    def worker(k):
        conn = connection(intake)
        while time.monotonic() < end:
            try:
                status, _ = request(conn, "POST", f"/v1/applications/{app}/events", body, headers)
            except (OSError, http.client.HTTPException):
                conn = connection(intake)
                continue
            if status == 202:
                taken[k] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(taken) / (time.monotonic() - began)


def workdir(prefix):
    """A temporary directory, kept (and named on stderr) with KEEP=1."""
    if os.environ.get("KEEP"):
        import contextlib
        path = tempfile.mkdtemp(prefix=prefix)
        print(f"  kept: {path}", file=sys.stderr)
        return contextlib.nullcontext(path)
    return tempfile.TemporaryDirectory(prefix=prefix)


def main():
    rx_port = start_receiver()
    rows = []
    fans = []
    for n in COUNTS:
        with workdir(f"dripfeed-scale-{n}-") as work:
            proc, intake, admin = start_relay(work, n, rx_port)
            ready(admin, 0)
            base = rss_kib(proc.pid)
            heap0 = heap_bytes(admin)
            took = create(admin, n, rx_port)
            time.sleep(IDLE_SETTLE)
            idle = rss_kib(proc.pid)
            if heap0:
                print(f"  {n}: heap per idle destination: {(heap_bytes(admin) - heap0) / n:,.0f} bytes",
                      file=sys.stderr)
            per_idle = (idle - base) * 1024 / n
            mbytes = metrics_bytes(admin)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            began = time.monotonic()
            proc, intake, admin = start_relay(work, n, rx_port)
            restart = time.monotonic() - began + ready(admin, n)
            base2 = rss_kib(proc.pid)
            heap2 = heap_bytes(admin)
            busy = min(n, WORK)
            names = [f"e{i}" for i in range(busy)]
            Receiver.arrivals.clear()
            with Receiver.lock:
                Receiver.total = 0
            post_work(intake, names)
            time.sleep(0.5)
            working = rss_kib(proc.pid)
            per_work = (working - base2) * 1024 / busy
            deadline = time.monotonic() + 120
            while Receiver.total < 2 * busy and time.monotonic() < deadline:
                time.sleep(0.2)
            delivered = Receiver.total
            time.sleep(SETTLE)
            after = rss_kib(proc.pid)
            per_after = (after - base2) * 1024 / busy
            heap_after = heap_bytes(admin)
            if heap2:
                print(f"  {n}: heap per destination with work, {SETTLE} s after: "
                      f"{(heap_after - heap2) / busy:,.0f} bytes", file=sys.stderr)
            worst = max((max(s.values()) for s in Receiver.arrivals.values()), default=0)
            fans.append((n, fan_out(intake, admin, rx_port)))
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            rows.append((n, took, n / took, per_idle, mbytes, restart, busy, delivered,
                         per_work, per_after, worst))
    print(f"| destinations ({QUEUE}) | create (8 clients) | creations/s | RSS per idle | /metrics "
          f"| restart to ready | with work | delivered | RSS per one with work "
          f"| {SETTLE} s after | most in one second (1/s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (n, took, rate, per_idle, mbytes, restart, busy, delivered, per_work, per_after,
         worst) in rows:
        print(f"| {n:,} | {took:.1f} s | {rate:,.0f} | {per_idle / 1024:.1f} KiB "
              f"| {mbytes / 1024:,.0f} KiB | {restart:.1f} s | {busy:,} | {delivered:,} "
              f"| {per_work / 1024:.1f} KiB | {per_after / 1024:.1f} KiB | {worst} |")

    print()
    print(f"| destinations ({QUEUE}) | endpoints an event goes to | 202 p99 | post to the last copy, p99 "
          f"| events taken per second ({CLIENTS} clients) |")
    print("|---|---|---|---|---|")
    for n, fan in fans:
        for k, answer, last, rate in fan:
            print(f"| {n:,} | {k:,} | {answer:.1f} ms | {last:.1f} ms | {rate:,.0f} |")


if __name__ == "__main__":
    main()
