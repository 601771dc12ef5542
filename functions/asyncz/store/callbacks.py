"""The PostgreSQL adapter's queries of durable tasks' callbacks (``sql/callbacks.sql``): the
store's ``callbacks`` part (:class:`asyncz.wait_ports.CallbackStore`). A callback is a wait
(:mod:`asyncz.store.steps` resolves it); these find it by its token's hash, move its
deadline on a heartbeat (the worker's side is in the ``steps`` part)."""

from __future__ import annotations

from datetime import datetime

from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class CallbackQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def find(self, token_hash: str) -> Row | None:
        """The callback of this token hash: job_id, seq, status ('waiting' or 'completed'),
        job_status, wait_until; None: no such token."""
        return await self._run.one("find_callback", {"token_hash": token_hash})

    async def heartbeat(self, token_hash: str) -> datetime | None:
        """Move a waiting callback's deadline to at least now plus its timeout; the deadline,
        or None when it does not wait (used, unknown, or its job has ended)."""
        row = await self._run.one("heartbeat_callback", {"token_hash": token_hash})
        return None if row is None else row["wait_until"]
