"""Routes of activity (scope ``read``): ``GET /workers`` (the live workers and what each
runs now) and ``GET /stats/tasks`` (each task's figures over the last hour)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, Field

from asyncz.maintenance.activity import FIGURES_MINUTES
from asyncz.service import JobService


class RunningJob(BaseModel):
    job_id: str
    task: str
    queue: str
    attempt: int
    started_at: datetime
    elapsed_seconds: float
    progress: float | None = None
    progress_message: str | None = None


class WorkerOut(BaseModel):
    worker_id: str
    since: datetime | None = Field(description="when it first registered")
    presence_until: datetime | None = Field(description="its heartbeat's presence expires")
    running: list[RunningJob]


class UnknownWorker(BaseModel):
    worker_id: str
    running: list[RunningJob]


class Workers(BaseModel):
    workers: list[WorkerOut]
    unknown_workers: list[UnknownWorker] = Field(
        description="attempts whose worker has no presence in Redis (died, not reclaimed "
        "yet; or Redis was flushed)"
    )
    presence_available: bool = Field(description="false: Redis could not be read")


class TaskFigures(BaseModel):
    task: str
    queue: str
    runs: int = Field(description="attempts that finished in the window")
    completed: int
    failures: int = Field(description="failed, timed out or lost")
    retries: int = Field(description="attempts after the first")
    run_p50_ms: float | None
    run_p95_ms: float | None
    wait_p50_ms: float | None = Field(description="ready to start, of each job's latest attempt")
    wait_p95_ms: float | None


class TaskFiguresPage(BaseModel):
    minutes: int
    items: list[TaskFigures]


def mount_activity(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    router = APIRouter()

    @router.get("/workers", response_model=Workers, summary="Live workers and what they run")
    async def workers() -> Any:
        return await (await service()).activity.workers()

    @router.get("/stats/tasks", response_model=TaskFiguresPage, summary="Each task's last hour")
    async def task_figures() -> Any:
        items = await (await service()).activity.task_figures(FIGURES_MINUTES)
        return {"minutes": FIGURES_MINUTES, "items": items}

    app.include_router(router)
