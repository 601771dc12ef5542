"""Events as the client sends them (``POST /events``; docs/durable.md, "Events")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asyncz.client._core import Call


@dataclass(frozen=True, slots=True)
class SentEvent:
    """An event stored: its id, and how many waits it woke now (0: none waiting yet)."""

    event_id: int
    woken: int

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> SentEvent:
        return cls(int(data["event_id"]), int(data["woken"]))


def send_event_call(name: str, key: str, payload: Any) -> Call:
    """Sent once: an event sent twice is two events (a second wait could take the copy).
    No payload (``None``): the API's default, ``{}`` (a task reads ``None`` as a timeout)."""
    body = {"name": name, "key": key} | ({} if payload is None else {"payload": payload})
    return Call("POST", "/events", body, safe=False)
