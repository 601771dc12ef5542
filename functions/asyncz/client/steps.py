"""A durable job's steps as the client sees them (``GET /jobs/{id}/steps``), and the replay
that resets them (docs/durable.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from asyncz.client._core import Call

STEPS_PAGE = 500  # GET /jobs/{id}/steps' largest page


@dataclass(frozen=True, slots=True)
class Step:
    """One stored step: ``completed`` (its result replays), ``failed`` (it runs again) or
    ``waiting`` (a wait); ``attempts`` counts its runs."""

    seq: int
    name: str
    kind: str
    status: str
    attempts: int
    job_attempt: int
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    result_bytes: int
    error: str | None
    wait_until: datetime | None = None  # a wait's deadline (status "waiting" until then)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Step:
        values: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        for when in ("started_at", "finished_at", "wait_until"):
            if data.get(when) is not None:
                values[when] = datetime.fromisoformat(str(data[when]).replace("Z", "+00:00"))
        return cls(**values)


def steps_page(job_id: str, cursor: str | None) -> Call:
    return Call("GET", f"/jobs/{quote(job_id)}/steps",
                params={"limit": STEPS_PAGE, "cursor": cursor})  # fmt: skip


def replay_call(job_id: str, reset_steps: bool) -> Call:
    body = {"reset_steps": True} if reset_steps else None
    return Call("POST", f"/dlq/{quote(job_id)}/replay", body)


def all_steps(send: Callable[[Call], Any], job_id: str) -> list[Step]:
    """Every page of a job's steps."""
    out: list[Step] = []
    cursor = None
    while True:
        page = send(steps_page(job_id, cursor))
        out += [Step.from_api(s) for s in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            return out


async def all_steps_async(send: Callable[[Call], Awaitable[Any]], job_id: str) -> list[Step]:
    """Every page of a job's steps (asyncio)."""
    out: list[Step] = []
    cursor = None
    while True:
        page = await send(steps_page(job_id, cursor))
        out += [Step.from_api(s) for s in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            return out
