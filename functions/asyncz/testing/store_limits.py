"""The in-memory store's ``limits`` part (:mod:`asyncz.store.limits` on the store's dicts):
paused queues, and the running attempts and recent starts a rebuild of the limits counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from asyncz.port_types import Row

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


class MemoryStoreLimits:
    def __init__(self, store: StoreTables) -> None:
        self.store = store
        self.paused: dict[str, Row] = {}

    async def pause_queue(self, queue: str, by: str | None) -> bool:
        if queue in self.paused:
            return False
        self.paused[queue] = {"queue": queue, "paused_at": datetime.now(UTC), "paused_by": by}
        return True

    async def resume_queue(self, queue: str) -> bool:
        return self.paused.pop(queue, None) is not None

    async def paused_queues(self) -> dict[str, Row]:
        return dict(sorted(self.paused.items()))

    async def running_limited(
        self, tasks: Sequence[str], lease_seconds: float, limit: int
    ) -> list[Row]:
        now, lease = datetime.now(UTC), timedelta(seconds=lease_seconds)
        return [
            {"id": j["id"], "task": j["task"], "concurrency_key": j["concurrency_key"],
             "left_ms": _ms(j["heartbeat_at"] + lease - now)}
            for j in self.store.jobs.values()
            if j["status"] == "processing" and j["task"] in tasks
            and j["heartbeat_at"] > now - lease
        ][:limit]  # fmt: skip

    async def recent_starts(self, windows: Mapping[str, float], limit: int) -> list[Row]:
        now, out = datetime.now(UTC), []
        for task, seconds in sorted(windows.items()):
            since = now - timedelta(seconds=seconds)
            found = [
                (a, j) for j in self.store.jobs.values() if j["task"] == task
                for a in self.store.attempts.get(j["id"], []) if a["started_at"] > since
            ]  # fmt: skip
            found.sort(key=lambda aj: aj[0]["started_at"], reverse=True)
            out += [
                {"task": task, "concurrency_key": j["concurrency_key"], "job_id": j["id"],
                 "attempt": a["attempt"], "age_ms": _ms(now - a["started_at"])}
                for a, j in found[:limit]
            ]  # fmt: skip
        return out
