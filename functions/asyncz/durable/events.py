"""A durable task's wait for an event (docs/durable.md, "Events"): ``ctx.wait_for_event(name,
key=, timeout=, senders=)`` is a wait (:mod:`asyncz.durable.waiting`) of kind ``event``
whose routing key is its name and key. ``POST /events`` (:mod:`asyncz.service.events`)
resolves the waits on them; a wait that begins after the event was sent finds it by itself
(its look-back: ``open_event_wait``), among the events kept since its job's submit. The
task gets the event's payload, or ``None`` when the timeout passes first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from asyncz.durable.waiting import WaitCall
from asyncz.errors import StepUsageError

MAX_NAME = 100  # an event's name (its wait's step is named after it)
MAX_KEY = 200
MAX_SENDERS = 20


def wait_key(name: str, key: str) -> str:
    """The routing key of an event and of the waits on it: name and key, unambiguous."""
    return json.dumps([name, key], ensure_ascii=False, separators=(",", ":"))


def event_value(event_id: int, payload_json: str) -> str:
    """What a wait an event resolves stores: ``{"event": id, "payload": ...}`` (JSON)."""
    return f'{{"event": {int(event_id)}, "payload": {payload_json}}}'


def _payload(value: Any) -> Any:
    """An event wait's stored value into what the task gets (``None``: it timed out)."""
    return value.get("payload") if isinstance(value, dict) else None


def check_event(name: Any, key: Any) -> None:
    """An event's name and key, as a wait and a delivery both need them."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or "\x00" in name:
        raise StepUsageError(f"an event's name is a string of 1 to {MAX_NAME} characters")
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY or "\x00" in key:
        raise StepUsageError(f"event {name!r}: key= is a string of 1 to {MAX_KEY} characters")


def event_wait(name: str, key: str, timeout: float, senders: Sequence[str] | None,
               step: str) -> WaitCall:  # fmt: skip
    """The wait ``ctx.wait_for_event`` asks for, its inputs checked."""
    check_event(name, key)
    terms = None
    if senders is not None:
        if (isinstance(senders, str) or not isinstance(senders, Sequence)
                or not 0 < len(senders) <= MAX_SENDERS
                or not all(isinstance(s, str) and 0 < len(s) <= 64 for s in senders)):  # fmt: skip
            raise StepUsageError(
                f"event {name!r}: senders= is a list of 1 to {MAX_SENDERS} API key names"
            )
        terms = {"from": sorted(set(senders))}
    about = f"event {name!r} key {key!r}"
    return WaitCall(step, "event", timeout, about, key=wait_key(name, key), terms=terms,
                    decode=_payload)  # fmt: skip
