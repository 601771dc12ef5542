"""The PostgreSQL adapter's queries of activity (``sql/activity.sql``): per-task figures of
the last hour and the attempts running now; the store's ``activity`` part
(:class:`asyncz.ports.ActivityStore`)."""

from __future__ import annotations

from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class ActivityQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def task_figures(self, minutes: int) -> list[Row]:
        # planned for its window each time (as finished_per_minute)
        return await self._run.rows("task_figures", {"minutes": minutes}, prepare=False)

    async def running_jobs(self, limit: int) -> list[Row]:
        return await self._run.rows("running_jobs", {"limit": limit})
