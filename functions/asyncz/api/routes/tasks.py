"""Routes of tasks: the registered tasks with their schemas and limits (``GET /tasks``) and
the periodic ones (``GET /schedules``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI

from asyncz.api.routes.stats_models import ScheduleList
from asyncz.api.routes.tasks_models import TaskList
from asyncz.service import JobService


def mount_tasks(
    app: FastAPI, service: Callable[[], Awaitable[JobService]], catalog: Callable[[], TaskList]
) -> None:
    @app.get("/tasks", response_model=TaskList, summary="Registered tasks and their schemas")
    async def tasks() -> Any:
        limits = {t["task"]: t["limits"] for t in (await service()).task_listing()}
        listed = catalog().items
        return TaskList(
            items=[t.model_copy(update={"limits": limits.get(t.name, {})}) for t in listed]
        )

    @app.get("/schedules", response_model=ScheduleList, summary="Periodic jobs")
    async def schedules() -> Any:
        return {"items": await (await service()).schedules()}
