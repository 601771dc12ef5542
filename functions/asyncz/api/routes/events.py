"""Routes of events: ``POST /events`` (scope ``events``) wakes the durable tasks waiting for
an event of that name and key (docs/durable.md, "Events"); recorded in the audit trail
with the sending key's name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from asyncz.api.routes.keys import principal_of
from asyncz.durable.events import MAX_KEY, MAX_NAME
from asyncz.service import JobService


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME, description="e.g. approval")
    key: str = Field(min_length=1, max_length=MAX_KEY, description="e.g. order:1")
    payload: Any = Field(default_factory=dict, description="any JSON (default {}): what the "
                         "waiting tasks get (null reads as a timeout)")  # fmt: skip


class EventSent(BaseModel):
    event_id: int
    woken: int = Field(description="the waits it resolved now (0: none waiting yet; a wait "
                       "that begins later, in a job submitted before, still takes it)")  # fmt: skip


def mount_events(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    @app.post("/events", response_model=EventSent, status_code=202,
              summary="Send an event to the durable tasks waiting for it")  # fmt: skip
    async def send_event(body: EventIn, request: Request) -> Any:
        """Stored, and delivered to the waits on its name and key (``ctx.wait_for_event``),
        each job's earliest, in bounded pages; a wait that names its senders takes it only
        from one of those keys."""
        svc, actor = await service(), principal_of(request)
        async with svc.access.audited(actor, "event.send", body.name, {"key": body.key}) as done:
            sent = await svc.events.send(body.name, body.key, body.payload, sender=actor.name,
                                         sender_key_id=actor.key_id)  # fmt: skip
            done.update(event_id=sent.event_id, woken=sent.woken)
        return EventSent(event_id=sent.event_id, woken=sent.woken)
