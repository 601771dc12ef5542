"""Routes of flow control: pause and resume a queue, list the queues. Each task's limits are
in ``GET /tasks`` (asyncz.api.routes.tasks_models)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Request

from asyncz.api.routes.jobs_models import NAME_PATTERN
from asyncz.api.routes.keys import principal_of
from asyncz.api.routes.limits_models import QueueList, QueueState
from asyncz.fleet.scale_out import ScaleOut
from asyncz.service import JobService

QueueName = Annotated[str, Path(pattern=NAME_PATTERN)]


def mount_queues(
    app: FastAPI, service: Callable[[], Awaitable[JobService]], scale_out: ScaleOut
) -> None:
    router = APIRouter()

    @router.post("/queues/{name}/pause", response_model=QueueState, summary="Pause a queue")
    async def pause(name: QueueName, request: Request) -> Any:
        """Jobs are still accepted; none starts until the queue is resumed (recorded in the
        audit trail with the key's id and name)."""
        svc, actor = await service(), principal_of(request)
        async with svc.access.audited(actor, "pause", name, {}):
            return await svc.pause_queue(name, actor.name)

    @router.post("/queues/{name}/resume", response_model=QueueState, summary="Resume a queue")
    async def resume(name: QueueName, request: Request) -> Any:
        """What the queue holds starts now: the workers its backlog lacks are started as
        after a submit, not at the fleet's next tick (up to a minute later)."""
        svc, actor = await service(), principal_of(request)
        async with svc.access.audited(actor, "resume", name, {}):
            state = await svc.resume_queue(name)
        await scale_out(svc.broker)
        return state

    @router.get("/queues", response_model=QueueList, summary="Queues, paused or not")
    async def queues() -> Any:
        return {"items": await (await service()).queue_states()}

    app.include_router(router)
