"""The PostgreSQL adapter's queries for flow control's limits (``sql/limits.sql``): the
store's ``limits`` part (:class:`asyncz.ports.LimitStore`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class LimitQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def pause_queue(self, queue: str, by: str | None) -> bool:
        return await self._run.one("pause_queue", {"queue": queue, "by": by}) is not None

    async def resume_queue(self, queue: str) -> bool:
        return await self._run.one("resume_queue", {"queue": queue}) is not None

    async def paused_queues(self) -> dict[str, Row]:
        return {r["queue"]: r for r in await self._run.rows("paused_queues")}

    async def running_limited(
        self, tasks: Sequence[str], lease_seconds: float, limit: int
    ) -> list[Row]:
        return await self._run.rows(
            "running_limited", {"tasks": list(tasks), "lease": lease_seconds, "limit": limit}
        )

    async def recent_starts(self, windows: Mapping[str, float], limit: int) -> list[Row]:
        tasks = sorted(windows)
        params = {"tasks": tasks, "seconds": [windows[t] for t in tasks], "limit": limit}
        return await self._run.rows("recent_starts", params)
