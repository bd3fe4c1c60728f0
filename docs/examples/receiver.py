# A webhook receiver for dripfeed-relay: checks the Standard Webhooks
# signature, drops repeats by idempotency-key, answers 204.
# Run: WEBHOOK_SECRET=whsec_... python3 receiver.py PORT   (standard library only)
import base64, hashlib, hmac, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE = 5 * 60  # seconds a webhook-timestamp may be away from our clock

# The key is the base64 after "whsec_" (the relay also takes it without padding).
if not os.environ.get("WEBHOOK_SECRET"):
    sys.exit("receiver.py: set WEBHOOK_SECRET to the destination's secret (whsec_...)")
secret = os.environ["WEBHOOK_SECRET"].removeprefix("whsec_")
KEY = base64.b64decode(secret + "=" * (-len(secret) % 4))

seen = set()  # keep these in your database, beside what the webhook changed
lock = threading.Lock()


def verified(headers, body):
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not msg_id or not stamp.isdecimal() or abs(time.time() - int(stamp)) > TOLERANCE:
        return False
    # The signed content is "{webhook-id}.{webhook-timestamp}.{body}".
    mac = hmac.new(KEY, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256)
    expected = b"v1," + base64.b64encode(mac.digest())
    # One signature per secret, space-separated ("v1,NEW v1,OLD" during a rotation);
    # compare_digest takes the same time wherever the strings differ.
    return any(hmac.compare_digest(expected, sig.encode("latin-1"))
               for sig in headers.get("webhook-signature", "").split())


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the relay reuses connections

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        key = self.headers.get("idempotency-key", "")  # equals webhook-id
        with lock:  # check and record a key as one step
            if not verified(self.headers, body):
                status, line = 401, f"invalid {self.headers.get('webhook-id', '-')}"
            elif key in seen:  # delivered before: do nothing, but say yes
                status, line = 204, f"duplicate {key}"
            else:
                seen.add(key)  # your work goes here, before the 2xx
                # An event's copy names its type (absent on a plain webhook).
                kind = self.headers.get("webhook-event-type")
                shown = f"{kind} " if kind else ""
                status, line = 204, f"valid {key} {shown}{body.decode(errors='replace')}"
            print(line.replace("\n", " "), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):  # no access log on stderr
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
