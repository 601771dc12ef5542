"""Routes of durable tasks' steps: ``GET /jobs/{id}/steps``, a page at a time (scoped like
``GET /jobs/{id}/attempts``: any job with ``read``, its own with ``submit``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import FastAPI, Query, Request
from pydantic import BaseModel

from asyncz.access import Scope
from asyncz.api.access import forbidden
from asyncz.api.replies import json_response
from asyncz.api.routes.jobs import about, may_read
from asyncz.api.routes.keys import principal_of
from asyncz.errors import InvalidCursorError
from asyncz.port_types import Row
from asyncz.service import JobService


class StepOut(BaseModel):
    """One stored step: ``completed`` (its result replays), ``failed`` (it runs again on
    the next try) or ``waiting`` (a wait with no value yet); ``attempts`` counts its runs,
    retries and job attempts included."""

    seq: int
    name: str
    kind: Literal["step", "now", "uuid", "sleep", "callback"]
    status: Literal["completed", "failed", "waiting"]  # waiting: a wait with no value yet
    attempts: int
    job_attempt: int  # the job's attempt that stored it last
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    result_bytes: int
    error: str | None

    @classmethod
    def of(cls, row: Row) -> StepOut:
        return cls(**{k: row[k] for k in cls.model_fields})


class StepPage(BaseModel):
    job_id: str
    items: list[StepOut]
    next_cursor: str | None  # pass as ?cursor= for the next page; null: none left


def mount_steps(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    @app.get("/jobs/{job_id}/steps", response_model=StepPage, summary="Durable steps")
    async def get_steps(
        job_id: UUID,
        request: Request,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[str | None, Query(max_length=20)] = None,
    ) -> Any:
        svc = await service()
        me = principal_of(request)
        if not me.may(Scope.READ) and not may_read(
            me, (await svc.get(str(job_id))).submitted_by_key_id
        ):
            return json_response(forbidden(me, Scope.READ))
        rows = await svc.steps(about(job_id), limit, _after(cursor))
        last = str(rows[-1]["seq"]) if len(rows) == limit else None
        return StepPage(job_id=str(job_id), items=[StepOut.of(r) for r in rows], next_cursor=last)


def _after(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise InvalidCursorError("cursor is not one this API issued")
    return int(cursor)
