"""Keyset pagination: the opaque cursor the API hands out, and the page size budget."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from datetime import datetime

from asyncz.errors import InvalidCursorError
from asyncz.jobs import Job


def encode_cursor(when: datetime, job_id: str) -> str:
    raw = json.dumps({"t": when.isoformat(), "i": job_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _uuid(text: str) -> str:
    return str(uuid.UUID(text))


def decode_cursor(
    cursor: str | None, ident: Callable[[str], str] = _uuid
) -> tuple[datetime, str] | None:
    """Validate an opaque cursor; a forged or garbled one is a client error, never a 500.
    ``ident`` checks the row's id (a job's uuid by default)."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        when = datetime.fromisoformat(data["t"])
        job_id = ident(str(data["i"]))
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursorError("cursor is not one this API issued") from exc
    if when.tzinfo is None:
        raise InvalidCursorError("cursor is not one this API issued")
    return when, job_id


# A Lambda response is at most 6 MB: a page stops adding jobs once their payloads and
# results pass this many bytes, and says where to go on (next_cursor).
PAGE_BUDGET_BYTES = 4 * 1024 * 1024


def fit_page(jobs: list[Job], budget: int = PAGE_BUDGET_BYTES) -> list[Job]:
    """The leading jobs whose payloads and results fit ``budget`` (always at least one)."""
    used = 0
    for n, job in enumerate(jobs):
        used += len(json.dumps(job.payload)) + len(json.dumps(job.result)) + 1024
        if used > budget and n > 0:
            return jobs[:n]
    return jobs
