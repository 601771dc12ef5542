"""Putting committed jobs' ids in Redis. Quietly: when Redis fails, the rows are safe in
PostgreSQL and recovery enqueues them, so the caller is told, not failed."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from asyncz.errors import BrokerUnavailableError
from asyncz.port_types import Dispatch, Row, epoch_ms
from asyncz.ports import JobBroker

log = logging.getLogger("asyncz.service")


def dispatch_of(row: Row) -> Dispatch:
    """Where a row's id belongs in Redis (ready when due, else delayed)."""
    return Dispatch(
        job_id=str(row["id"]),
        queue=row["queue"],
        priority=row["priority"],
        run_at_ms=epoch_ms(row["run_at"]),
        due=bool(row.get("due", True)),
    )


class Enqueuer:
    def __init__(self, broker: JobBroker) -> None:
        self.broker = broker

    async def enqueue_quietly(self, rows: Sequence[Row]) -> bool:
        """Enqueue the jobs of these rows (id, queue, priority, run_at, due)."""
        return await self.dispatch_quietly([dispatch_of(r) for r in rows])

    async def enqueue_queued(self, rows: Sequence[Row]) -> None:
        """A duplicate submit of a queued job puts its id in Redis again (``ZADD NX``:
        harmless when it is there), so a job whose first submit crashed after the commit
        runs now rather than at the next recovery sweep."""
        queued = [r for r in rows if r["status"] == "queued"]
        if queued:
            await self.enqueue_quietly(queued)

    async def dispatch_quietly(self, items: Sequence[Dispatch]) -> bool:
        """Enqueue ids; when Redis is down, say so and rely on recovery (the rows are safe)."""
        if not items:
            return True
        try:
            await self.broker.enqueue(items)
            return True
        except BrokerUnavailableError as exc:
            log.warning("enqueue deferred to recovery: %s", exc)
            return False
