"""Sending an event (docs/durable.md, "Events"; ``POST /events``): the event is stored and
the durable tasks' waits on its name and key are resolved with it, the first page in the
same transaction (under the lock a wait's look-back takes: an event is never missed by a
wait that begins meanwhile), the rest a bounded page per statement. An event for nothing
waiting is kept all the same: a wait that begins later, in a job submitted before the event,
takes it (for as long as retention keeps it, ``ASYNCZ_RETAIN_EVENTS_SECONDS``). A delivery
of more than one page is marked pending until its last page: recovery finishes one whose
caller died."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from asyncz.durable.events import check_event, event_value, wait_key
from asyncz.errors import InvalidInputError, InvalidPayloadError, StepUsageError
from asyncz.faults import crash_point
from asyncz.jobs import unstorable
from asyncz.ports import JobStore
from asyncz.service.waits import RESOLVE_PAGE, Waits
from asyncz.settings import Settings

# A delivery still pending after this long lost its caller (one under way that recovery
# finishes too changes nothing twice: each resolve is conditional, and skips a job that took
# the event).
PENDING_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class SentEvent:
    event_id: int
    woken: int  # the waits it resolved (one per job at most), each job woken


class Events:
    def __init__(self, store: JobStore, waits: Waits, settings: Settings) -> None:
        self.store = store
        self.waits = waits
        self.settings = settings

    async def send(self, name: str, key: str, payload: Any = None, *, sender: str | None = None,
                   sender_key_id: str | None = None) -> SentEvent:  # fmt: skip
        """Store the event and resolve the waits on ``name`` and ``key`` with ``payload``
        (those that accept ``sender``, an API key's name); how many it woke."""
        try:
            check_event(name, key)
        except StepUsageError as exc:
            raise InvalidInputError(str(exc)) from None
        if problem := unstorable(payload):
            raise InvalidPayloadError(f"the event's payload {problem}")
        text = json.dumps(payload, allow_nan=False)
        if len(text.encode()) > self.settings.max_payload_bytes:
            raise InvalidPayloadError(
                f"the event's payload is {len(text.encode())} bytes of JSON; the limit is "
                f"{self.settings.max_payload_bytes} (ASYNCZ_MAX_PAYLOAD_BYTES)"
            )
        routing = wait_key(name, key)
        event = {"name": name, "key": key, "wait_key": routing, "payload": text,
                 "sent_by": sender, "sent_by_key_id": sender_key_id}  # fmt: skip
        event_id, value, rows = await self.store.events.send(event, RESOLVE_PAGE)
        woken = await self.waits.wake(rows)
        if len(rows) == RESOLVE_PAGE:  # more waiting: the rest, a page per statement
            crash_point("events.between_pages")  # chaos: recovery finishes the delivery
            woken += await self.waits.resolve_keyed_json(
                "event", routing, value, sender, after=str(rows[-1]["id"])
            )
        if woken or len(rows) == RESOLVE_PAGE:
            await self.store.events.finish(event_id, woken)
        return SentEvent(event_id, woken)

    async def finish_pending(self) -> int:
        """Recovery: deliveries whose caller died between two pages are finished (from the
        first page again: a job that took the event is not given it twice); how many."""
        rows = await self.store.events.pending(PENDING_SECONDS, self.settings.recovery_batch_size)
        for r in rows:
            value = event_value(int(r["id"]), r["payload"])
            woke = await self.waits.resolve_keyed_json("event", r["wait_key"], value,
                                                       r["sent_by"])  # fmt: skip
            await self.store.events.finish(int(r["id"]), woke)
        return len(rows)
