"""The Python SDK against a live relay (run by sdk/test.sh).

Through the generated clients only: makes a destination pointing at a
receiver this test runs, posts a webhook and reads its status until
delivered, checks the delivery's signature with dripfeed_webhooks,
changes the destination's rate, lets a refusing receiver dead-letter a
webhook, pages the dead letters, redrives it once the receiver takes it,
and posts an event that fans out to an application's endpoint.

Environment: INTAKE_URL, ADMIN_URL, INTAKE_KEY, ADMIN_TOKEN.
"""

import base64
import http.server
import os
import threading
import time

from dripfeed_admin import AuthenticatedClient as Admin
from dripfeed_admin.api.admin import (
    get_destination,
    list_dead_letters,
    patch_destination,
    put_destination,
    redrive,
)
from dripfeed_admin.api.events import put_application, put_endpoint
from dripfeed_admin.models import DestinationPatch, DestinationPut, RedriveIds, ApplicationPut
from dripfeed_intake import AuthenticatedClient as Intake
from dripfeed_intake.api.intake import deliver_webhook, get_webhook, post_event
from dripfeed_intake.models import EventIn
from dripfeed_webhooks import InvalidSignature, verify

SECRET = "whsec_" + base64.b64encode(b"sdk-test-secret-of-32-bytes-long").decode()


class Receiver:
    """Takes deliveries on a free port; refuses (400) while told to."""

    def __init__(self):
        self.got = []  # (path, webhook-id, verified, event type)
        self.refuse = False
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    verify(SECRET, headers, body)
                    ok = True
                except InvalidSignature:
                    ok = False
                outer.got.append((self.path, headers.get("webhook-id"), ok, headers.get("webhook-event-type")))
                self.send_response(400 if outer.refuse else 204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def eventually(what, check, seconds=20.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s: {what}")


def main():
    intake = Intake(base_url=os.environ["INTAKE_URL"], token=os.environ["INTAKE_KEY"])
    admin = Admin(base_url=os.environ["ADMIN_URL"], token=os.environ["ADMIN_TOKEN"])
    rx = Receiver()

    # Make a destination (201), then change its rate.
    made = put_destination.sync_detailed(
        "sdk-py", client=admin, body=DestinationPut(url=f"{rx.url}/hooks", rate=50.0, secret=SECRET)
    )
    assert made.status_code == 201, (made.status_code, made.content)
    changed = patch_destination.sync_detailed("sdk-py", client=admin, body=DestinationPatch(rate=20.0))
    assert changed.status_code == 200, (changed.status_code, changed.content)
    assert changed.parsed.rate == 20.0, changed.parsed
    shown = get_destination.sync("sdk-py", client=admin)
    assert shown.rate == 20.0 and shown.url == f"{rx.url}/hooks", shown

    # A webhook: 202, then delivered, signed with the secret.
    sent = deliver_webhook.sync_detailed(client=intake, body={"order": 1}, x_destination="sdk-py")
    assert sent.status_code == 202, (sent.status_code, sent.content)
    webhook = sent.parsed.id
    status = eventually(
        "delivered",
        lambda: (s := get_webhook.sync(webhook, client=intake)) and str(s.state) == "delivered" and s,
    )
    assert status.attempts >= 1, status
    assert any(w == webhook and ok for _, w, ok, _ in rx.got), rx.got

    # Refused for good (400): dead-lettered; paged; redriven once taken.
    rx.refuse = True
    sent = deliver_webhook.sync_detailed(client=intake, body={"order": 2}, x_destination="sdk-py")
    assert sent.status_code == 202, (sent.status_code, sent.content)
    dead = sent.parsed.id

    def dead_letters():
        page = list_dead_letters.sync(client=admin, destination="sdk-py", limit=10)
        return page and [d for d in page.dead_letters if d.id == dead]

    eventually("dead-lettered", dead_letters)
    rx.refuse = False
    again = redrive.sync_detailed(client=admin, body=RedriveIds(ids=[dead]))
    assert again.status_code == 200, (again.status_code, again.content)
    eventually("redriven and delivered", lambda: sum(1 for _, w, ok, _ in rx.got if w == dead and ok) >= 2)

    # An event fans out to the application's endpoint subscribed to it.
    assert put_application.sync_detailed("shop", client=admin, body=ApplicationPut()).status_code in (200, 201)
    endpoint = put_endpoint.sync_detailed(
        "shop",
        "orders",
        client=admin,
        body=DestinationPut(url=f"{rx.url}/events", secret=SECRET, event_types=["order.*"]),
    )
    assert endpoint.status_code in (200, 201), (endpoint.status_code, endpoint.content)
    event = post_event.sync_detailed(
        "shop", client=intake, body=EventIn(type_="order.created", payload={"order": 3})
    )
    assert event.status_code == 202, (event.status_code, event.content)
    assert event.parsed.endpoints == 1, event.parsed
    eventually(
        "the event delivered",
        lambda: any(p == "/events" and ok and kind == "order.created" for p, _, ok, kind in rx.got),
    )
    print(f"python sdk: {len(rx.got)} deliveries received, each step as expected")


if __name__ == "__main__":
    main()
