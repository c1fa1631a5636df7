"""Verify sparecap's signed notice webhooks (standard library only).

A delivery is a CloudEvent (JSON) POSTed with three headers, as the
Standard Webhooks convention has them:

- ``webhook-id``: the delivery's ID, the same on every retry;
- ``webhook-timestamp``: when this attempt was signed, in Unix seconds;
- ``webhook-signature``: ``v1,<base64>``, several space-separated while a
  rotated secret still signs.

The signature is base64(HMAC-SHA256(key, id + "." + timestamp + "." +
body)), key being the base64-decoded part of the endpoint's secret after
``whsec_``. :func:`verify` checks one of the signatures and that the
timestamp is within five minutes of now (a captured request cannot be
replayed later); a :class:`Dedup` remembers the IDs handled, so a delivery
sent again is recognised.
"""

import base64
import binascii
import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE = 5 * 60
DEFAULT_DEDUP_WINDOW = 25 * 3600
DEFAULT_DEDUP_MAX = 100_000


class WebhookVerificationError(Exception):
    """A delivery that does not verify: its reason is the message."""


def _key(secret):
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise WebhookVerificationError("the secret is not a whsec_ secret")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not a whsec_ secret") from None
    if not key:
        raise WebhookVerificationError("the secret is not a whsec_ secret")
    return key


def _mac(key, msg_id, timestamp, body):
    signed = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    return hmac.new(key, signed, hashlib.sha256).digest()


def new_secret():
    """A new signing secret: ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(32)).decode()


def sign(secret, msg_id, timestamp, body):
    """The signature of a delivery: ``v1,`` and the base64 of its HMAC."""
    if isinstance(body, str):
        body = body.encode()
    return "v1," + base64.b64encode(_mac(_key(secret), msg_id, int(timestamp), body)).decode()


def _header(headers, name):
    # A dict of headers as a framework gives them, in any case.
    if hasattr(headers, "get"):
        v = headers.get(name)
        if v is None:
            for k in headers:
                if k.lower() == name:
                    return headers[k]
        return v
    return None


def verify(secret, headers, body, now=None, tolerance=DEFAULT_TOLERANCE):
    """Check a delivery; raise WebhookVerificationError if it does not verify.

    ``headers`` is a mapping of the request's headers (any case), ``body``
    the request's bytes as received (not decoded and encoded again),
    ``now`` the receiver's Unix time (default: time.time()). Returns the
    delivery's ID, for de-duplication.
    """
    key = _key(secret)
    if isinstance(body, str):
        body = body.encode()
    msg_id = _header(headers, HEADER_ID)
    ts_text = _header(headers, HEADER_TIMESTAMP)
    sigs = _header(headers, HEADER_SIGNATURE)
    try:
        timestamp = int(ts_text)
    except (TypeError, ValueError):
        timestamp = None
    if not msg_id or timestamp is None or not sigs:
        raise WebhookVerificationError(
            "missing or malformed webhook-id, webhook-timestamp or webhook-signature header")
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise WebhookVerificationError(
            "the timestamp is too far from now: signed %ds %s" %
            (abs(now - timestamp), "ago" if now > timestamp else "ahead"))
    want = _mac(key, msg_id, timestamp, body)
    for sig in sigs.split():
        version, _, enc = sig.partition(",")
        if version != "v1":
            continue
        try:
            got = base64.b64decode(enc, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(got, want):
            return msg_id
    raise WebhookVerificationError("no signature matches")


class Dedup:
    """The delivery IDs a receiver has handled, in memory.

    Check :meth:`seen` before handling a delivery and :meth:`add` its ID
    once it is handled: a delivery whose handling failed is then handled
    again when it is retried. IDs are remembered for ``window`` seconds
    (longer than sparecap retries a delivery) and at most ``max`` of them,
    the oldest forgotten first. Safe for concurrent use.
    """

    def __init__(self, window=DEFAULT_DEDUP_WINDOW, max=DEFAULT_DEDUP_MAX):
        self.window = window
        self.max = max
        self._added = OrderedDict()
        self._lock = threading.Lock()

    def _expire(self, now):
        while self._added:
            msg_id, at = next(iter(self._added.items()))
            if now - at < self.window and len(self._added) <= self.max:
                break
            del self._added[msg_id]

    def seen(self, msg_id, now=None):
        """Whether msg_id was added within the window."""
        now = time.time() if now is None else now
        with self._lock:
            self._expire(now)
            at = self._added.get(msg_id)
            return at is not None and now - at < self.window

    def add(self, msg_id, now=None):
        """Remember msg_id as handled."""
        now = time.time() if now is None else now
        with self._lock:
            self._added.pop(msg_id, None)
            self._added[msg_id] = now
            self._expire(now)

    def __len__(self):
        with self._lock:
            return len(self._added)
