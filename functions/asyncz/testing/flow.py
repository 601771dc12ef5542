"""In-memory paused queues: :mod:`asyncz.store.flow` on a dict."""

from __future__ import annotations

from datetime import UTC, datetime

from asyncz.ports import Row


class MemoryFlow:
    def __init__(self) -> None:
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
