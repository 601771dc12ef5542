"""Group the completions of attempts that finish together into one fenced statement.

A burst of short jobs finishing in the same event-loop turn costs one commit instead of
one per job (a WAL flush each). Nothing waits to fill a batch: the flush runs at the next
loop turn, so a lone completion is as fast as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asyncz.errors import InvalidInputError
from asyncz.jobs import Lease
from asyncz.service import JobService

MAX_BATCH = 100


class CompletionBatcher:
    def __init__(self, service: JobService, max_batch: int = MAX_BATCH) -> None:
        self.service = service
        self.max_batch = max_batch
        self._pending: list[tuple[Lease, Any, asyncio.Future[bool]]] = []
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()

    async def complete(self, lease: Lease, result: Any) -> bool:
        """Complete one attempt with the others of this turn; False if its lease was lost."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._pending.append((lease, result, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._write(batch))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _write(self, batch: list[tuple[Lease, Any, asyncio.Future[bool]]]) -> None:
        try:
            try:
                held = await self.service.complete_many(
                    [(lease, result) for lease, result, _ in batch]
                )
            except InvalidInputError:
                if len(batch) == 1:
                    raise
                # one value the database refused must not sink the others: one by one, so
                # only its own attempt fails
                for item in batch:
                    await self._write([item])
                return
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for lease, _, future in batch:
            if not future.done():
                future.set_result(lease.job_id in held)
