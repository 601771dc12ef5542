"""Routes of the DLQ (the dead jobs): list them, replay one or many, purge one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, Query, Request, Response

from asyncz.api.routes.jobs import CASCADE_RESPONSES, about, cascading
from asyncz.api.routes.jobs_models import (
    BulkReplay,
    BulkReplayed,
    JobOut,
    JobPage,
    JobState,
    ReplayOne,
)
from asyncz.api.routes.keys import principal_of
from asyncz.service import JobService


def mount_dlq(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    @app.get("/dlq", response_model=JobPage, summary="Dead jobs")
    async def list_dlq(
        queue: Annotated[str | None, Query(max_length=100)] = None,
        task: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        page = await (await service()).list_dead(queue=queue, task=task, limit=limit, cursor=cursor)
        return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)

    @app.post("/dlq/replay", response_model=BulkReplayed, summary="Replay dead jobs in bulk")
    async def replay_dead(request: Request, body: BulkReplay | None = None) -> Any:
        body = body or BulkReplay()
        svc = await service()
        actor = principal_of(request)
        async with svc.access.audited(actor, "bulk_replay", None, body.model_dump()) as done:
            ids = await svc.replay_dead(queue=body.queue, task=body.task, limit=body.limit)
            done["count"] = len(ids)
        return BulkReplayed(replayed=len(ids), job_ids=ids)

    @app.post(
        "/dlq/{job_id}/replay",
        response_model=JobState,
        summary="Replay one dead job",
        responses=CASCADE_RESPONSES,
    )
    async def replay_job(job_id: UUID, request: Request, body: ReplayOne | None = None) -> Any:
        body = body or ReplayOne()
        svc = await service()
        detail = {"reset_steps": True} if body.reset_steps else {}
        async with svc.access.audited(principal_of(request), "replay", str(job_id), detail):
            job = await svc.replay(about(job_id), reset_steps=body.reset_steps)
        return cascading(
            JobState(job_id=job.id, status=job.status.value, cascade_pending=job.cascade_pending)
        )

    @app.delete(
        "/dlq/{job_id}", status_code=204, summary="Purge a dead job", response_class=Response
    )
    async def purge_job(job_id: UUID, request: Request) -> Response:
        svc = await service()
        async with svc.access.audited(principal_of(request), "purge", str(job_id), {}):
            await svc.purge(about(job_id))
        return Response(status_code=204)
