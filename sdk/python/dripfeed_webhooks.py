"""Standard Webhooks signature verification for receivers of dripfeed-relay.

The relay signs each delivery as Standard Webhooks says: the headers
``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` ("v1,"
and the base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}" with the
secret's key; several space-separated while a secret is rotated).

    from dripfeed_webhooks import verify, InvalidSignature
    try:
        verify("whsec_...", request.headers, request.body)
    except InvalidSignature as e:
        return 401, str(e)

Standard library only; hand-written (the generated clients send and
manage webhooks, this checks what a receiver gets).
"""

import base64
import hashlib
import hmac
import time
from typing import Mapping, Optional

TOLERANCE = 5 * 60
"""Seconds a ``webhook-timestamp`` may be away from the receiver's clock."""


class InvalidSignature(Exception):
    """The delivery is not signed with the secret (or too old, or too new)."""


def _key(secret: str) -> bytes:
    text = secret.removeprefix("whsec_")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError as e:
        raise ValueError(f"the secret is not whsec_ and base64: {e}") from e


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value the relay sends for this delivery."""
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    tolerance: int = TOLERANCE,
    now: Optional[float] = None,
) -> str:
    """Checks a delivery's signature; returns its ``webhook-id``.

    ``headers`` is looked up in lower case (pass a case-insensitive mapping,
    or a dict with lower-case names). Raises :class:`InvalidSignature` when
    a header is missing, the timestamp is more than ``tolerance`` seconds
    away from ``now`` (default: the clock), or no signature matches.
    """
    get = headers.get
    msg_id = get("webhook-id") or ""
    stamp = get("webhook-timestamp") or ""
    signatures = (get("webhook-signature") or "").split()
    if not msg_id or not stamp.isdecimal() or not signatures:
        raise InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    clock = time.time() if now is None else now
    if abs(clock - int(stamp)) > tolerance:
        raise InvalidSignature(f"webhook-timestamp {stamp} is more than {tolerance} s away")
    expected = sign(secret, msg_id, int(stamp), body).encode()
    if not any(hmac.compare_digest(expected, s.encode("latin-1")) for s in signatures):
        raise InvalidSignature("no signature matches the secret")
    return msg_id
