"""Signing a delivery as Stripe does: ``AsyncZ-Signature: t=<unix seconds>,v1=<hex>`` where
each ``v1`` is the HMAC-SHA256, under one live secret, of ``"<t>.<body>"``. During a secret's
rotation both secrets sign (two ``v1``). The timestamp lets a receiver refuse a replay.

Pure: the receiver's side (:func:`verify`) is the recipe docs/events.md shows."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence

SIGNATURE_HEADER = "AsyncZ-Signature"
SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
TOLERANCE_SECONDS = 300  # a receiver refuses a delivery signed longer ago than this


def new_secret() -> str:
    """A signing secret: 32 random bytes, URL-safe, with a prefix that says what it is."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret`` (its UTF-8 bytes)."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(live_secrets: Sequence[str], timestamp: int, body: bytes) -> str:
    """The header's value: the timestamp, then one ``v1`` per live secret (newest first)."""
    return ",".join([f"t={timestamp}", *(f"v1={sign(s, timestamp, body)}" for s in live_secrets)])


def verify(
    header: str, body: bytes, secret: str, *, tolerance: float = TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:  # fmt: skip
    """Whether ``header`` signs ``body`` under ``secret`` within ``tolerance`` seconds."""
    parts = [p.split("=", 1) for p in header.split(",") if "=" in p]
    stamps = [v for k, v in parts if k.strip() == "t"]
    if len(stamps) != 1 or not stamps[0].strip().isdigit():
        return False
    timestamp = int(stamps[0])
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body)
    return any(k.strip() == "v1" and hmac.compare_digest(v.strip(), expected) for k, v in parts)
