"""Group the completions of one claim batch into one fenced statement.

The ids a worker claims together usually finish together (short jobs): their completions
cost one commit instead of one per job (a WAL flush each). A completion whose claim mates
still run waits for them, at most ``MAX_WAIT_SECONDS``; the last of the batch to finish
writes at the next event-loop turn with whatever else is pending. The fence stays per
attempt: the statement completes only the attempts whose lease token still holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asyncz.errors import InvalidInputError
from asyncz.jobs import Lease
from asyncz.service import JobService

MAX_BATCH = 100
MAX_WAIT_SECONDS = 0.005  # the longest a completion waits for its claim mates


class CompletionBatcher:
    def __init__(
        self, service: JobService, max_batch: int = MAX_BATCH, max_wait: float = MAX_WAIT_SECONDS
    ) -> None:
        self.service = service
        self.max_batch = max_batch
        self.max_wait = max_wait
        self._pending: list[tuple[Lease, Any, asyncio.Future[bool]]] = []
        self._soon: asyncio.Handle | None = None  # the flush at the next loop turn
        self._later: asyncio.TimerHandle | None = None  # the flush at the wait's end
        self._flushes: set[asyncio.Task[None]] = set()

    async def complete(self, lease: Lease, result: Any, *, mates_running: bool = False) -> bool:
        """Complete one attempt with the others pending; False if its lease was lost.

        ``mates_running``: attempts claimed with this one still run, so wait (briefly) for
        their completions to share the statement."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._pending.append((lease, result, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif not mates_running:
            if self._soon is None:
                self._soon = loop.call_soon(self._flush)
        elif self._later is None and self._soon is None:
            self._later = loop.call_later(self.max_wait, self._flush)
        return await future

    def _flush(self) -> None:
        for handle in (self._soon, self._later):
            if handle is not None:
                handle.cancel()
        self._soon = self._later = None
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
