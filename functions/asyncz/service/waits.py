"""Resolving durable tasks' waits (:mod:`asyncz.durable.waiting`): the service's side of a
wait's value arriving. The store completes the waiting step and wakes its job in one transaction
(the first commit wins: a later resolve, or the wait's timeout, changes nothing); after the
commit, a suspended job's id goes to the ready list. Should that enqueue be lost (Redis
down, a crash in between), the job's row is due now and recovery's due-suspended scan
enqueues it. A job whose attempt was still running is marked woken and its suspension
wakes it at once.

A new kind of wait resolves through :meth:`Waits.resolve` (one wait, by job and position)
or :meth:`Waits.resolve_keyed` (the waits on a routing key, a bounded page at a time)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from asyncz.faults import crash_point
from asyncz.port_types import Row
from asyncz.ports import JobStore
from asyncz.service.enqueue import Enqueuer

RESOLVE_PAGE = 500  # waits resolved per statement of a delivery


def value_json(value: Any) -> tuple[str, int]:
    """A wait's value as the JSON text it is stored as, and its size."""
    text = json.dumps(value, allow_nan=False)
    return text, len(text.encode())


class Waits:
    def __init__(self, store: JobStore, enqueuer: Enqueuer) -> None:
        self.store = store
        self.enqueuer = enqueuer

    async def resolve(self, job_id: str, seq: int, value: Any) -> bool:
        """Complete the wait at ``seq`` of job ``job_id`` with ``value`` and wake the job;
        False: it was not waiting (resolved or timed out first, or its job has ended)."""
        return await self.resolve_json(job_id, seq, value_json(value)[0])

    async def resolve_json(self, job_id: str, seq: int, text: str) -> bool:
        """The same with the value as JSON text."""
        row = await self.store.steps.resolve(job_id, seq, text, len(text.encode()))
        if row is None:
            return False
        await self.wake([row])
        return True

    async def resolve_keyed(self, kind: str, wait_key: str, value: Any,
                            resolver: str | None = None) -> int:  # fmt: skip
        """Resolve every wait of ``kind`` on ``wait_key`` (each job's earliest) with
        ``value``, a page per statement; how many it took."""
        return await self.resolve_keyed_json(kind, wait_key, value_json(value)[0], resolver)

    async def resolve_keyed_json(self, kind: str, wait_key: str, text: str,
                                 resolver: str | None,
                                 after: str | None = None) -> int:  # fmt: skip
        """The same with the value as JSON text, from the job after ``after``."""
        taken = 0
        while True:
            rows = await self.store.steps.resolve_keyed(kind, wait_key, text, len(text.encode()),
                                                        resolver, after, RESOLVE_PAGE)  # fmt: skip
            taken += await self.wake(rows)
            if len(rows) < RESOLVE_PAGE:
                return taken
            after = str(rows[-1]["id"])

    async def wake(self, rows: Sequence[Row]) -> int:
        """After the resolve's commit: the suspended jobs it woke go to the ready list (the
        running ones wake at their suspension); how many waits the rows say were taken."""
        taken = [r for r in rows if r.get("resolved", True)]
        crash_point("resolve.before_enqueue")  # chaos: recovery enqueues the due rows
        await self.enqueuer.enqueue_quietly([r for r in taken if r["status"] == "suspended"])
        return len(taken)
