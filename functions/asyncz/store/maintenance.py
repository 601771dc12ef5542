"""The PostgreSQL adapter's queries for maintenance (recovery, retention, periodic jobs,
count folding): the store's ``maintenance`` part (:class:`asyncz.ports.MaintenanceStore`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from asyncz.jobs import NewJob
from asyncz.store.queries import QUERIES
from asyncz.store.runner import QueryRunner, db_errors

Row = dict[str, Any]


class MaintenanceQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    # --- recovery ------------------------------------------------------------------------

    async def recover_stale_leases(self, lease_timeout: float, limit: int) -> list[Row]:
        return await self._run.rows(
            "recover_stale_leases", {"lease_timeout": float(lease_timeout), "limit": limit}
        )

    async def scan_queued(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        return await self._run.rows(
            "scan_queued",
            {
                "after_run_at": after[0] if after else None,
                "after_id": after[1] if after else None,
                "limit": limit,
            },
        )

    async def fold_finished_counts(self, lag_seconds: float) -> int:
        """Add the jobs that completed or were cancelled since the last fold (and at least
        ``lag_seconds`` ago) to the per-queue counts; returns how many. One transaction of
        two statements: lock the mark, then count with a snapshot taken after the lock."""
        with db_errors(self._run.query_timeout, "fold_finished_counts") as state:
            async with (
                asyncio.timeout(self._run.query_timeout),
                self._run.pool.connection() as conn,
                conn.transaction(),
                conn.cursor() as cur,
            ):
                state.sent = True
                await cur.execute(QUERIES["lock_fold_mark"], {"lag": float(lag_seconds)})
                mark = await cur.fetchone()
                if mark is None or mark["upto"] <= mark["folded_to"]:
                    return 0
                await cur.execute(QUERIES["fold_finished_counts"], mark)
                row = await cur.fetchone()
                return int(row["folded"]) if row else 0

    # --- retention -----------------------------------------------------------------------

    async def prune_finished(self, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` completed/cancelled jobs (and attempts); returns how many."""
        rows = await self._run.rows(
            "prune_finished", {"older_than": float(older_than), "limit": limit}
        )
        return int(rows[0]["n"])

    async def prune_dead(self, older_than: float, limit: int) -> int:
        rows = await self._run.rows("prune_dead", {"older_than": float(older_than), "limit": limit})
        return int(rows[0]["n"])

    async def prune_periodic_runs(self, older_than: float) -> None:
        await self._run.rows("prune_periodic_runs", {"older_than": float(older_than)})

    # --- periodic jobs -------------------------------------------------------------------

    async def last_periodic_runs(self, tasks: Sequence[str]) -> dict[str, Row]:
        """``{task: {"slot": datetime, "job_id": str | None}}`` for tasks with a slot."""
        rows = await self._run.rows("last_periodic_runs", {"tasks": list(tasks)})
        return {
            r["task"]: {"slot": r["slot"], "job_id": str(r["job_id"]) if r["job_id"] else None}
            for r in rows
        }

    async def mark_periodic_seen(self, task: str, slot: datetime) -> None:
        await self._run.rows("mark_periodic_seen", {"task": task, "slot": slot})

    async def insert_periodic_job(self, job_id: str, slot: datetime, new: NewJob) -> Row | None:
        """Insert the job of (task, slot); ``None`` when that slot has one already."""
        rows = await self._run.rows(
            "insert_periodic_job",
            {
                "id": job_id,
                "slot": slot,
                "task": new.task,
                "payload": Jsonb(new.payload),
                "queue": new.queue,
                "priority": new.priority,
                "max_retries": new.max_retries,
                "timeout_seconds": new.timeout_seconds,
            },
        )
        return rows[0] if rows else None
