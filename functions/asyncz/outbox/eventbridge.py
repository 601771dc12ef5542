"""The EventBridge sink: ``PutEvents`` in batches of up to 10 entries to the configured bus,
the entries that failed (``FailedEntryCount``, an ``ErrorCode`` each) sent again a few
times, then the batch raised (the outbox offers the page again later). EventBridge gives
each entry an id of its own and delivers at least once: consumers dedupe on our ``id``
inside ``detail``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from asyncz.outbox.sink import Envelope

BATCH = 10  # PutEvents takes at most 10 entries a call


class EventBridgePublishError(RuntimeError):
    """Some entries were still refused after the retries."""


class EventBridgeSink:
    def __init__(
        self,
        bus: str,
        *,
        client: Any = None,
        attempts: int = 4,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bus = bus
        self._client = client
        self._lock = threading.Lock()
        self.attempts = attempts
        self._pause = pause  # between retries of failed entries (a seam for tests)

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import boto3

                self._client = boto3.client("events")
            return self._client

    def entry(self, event: Envelope) -> dict[str, Any]:
        return {
            "Source": event.source,
            "DetailType": event.type,
            "Detail": json.dumps(event.as_dict(), default=str),
            "EventBusName": self.bus,
            "Time": datetime.fromisoformat(event.time),
            "Resources": [],
        }

    async def publish(self, events: Sequence[Envelope]) -> None:
        entries = [self.entry(e) for e in events]
        for start in range(0, len(entries), BATCH):
            await asyncio.to_thread(self.put, entries[start : start + BATCH])

    def put(self, entries: list[dict[str, Any]]) -> None:
        """One batch, its failed entries again (with a short backoff) until none fail."""
        pending = entries
        errors: list[str] = []
        for attempt in range(self.attempts):
            if attempt:
                self._pause(0.05 * 2**attempt)
            answer = self.client().put_events(Entries=pending)
            if not answer.get("FailedEntryCount"):
                return
            failed = [(e, r) for e, r in zip(pending, answer["Entries"], strict=True)
                      if r.get("ErrorCode")]  # fmt: skip
            pending = [e for e, _ in failed]
            errors = sorted({str(r["ErrorCode"]) for _, r in failed})
        raise EventBridgePublishError(
            f"{len(pending)} of {len(entries)} events refused by EventBridge "
            f"after {self.attempts} tries: {', '.join(errors)}"
        )

    async def tick(self, deadline: float) -> None:
        return None
