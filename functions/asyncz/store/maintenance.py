"""The PostgreSQL adapter's queries for maintenance (recovery, retention, periodic jobs,
count folding): the store's ``maintenance`` part (:class:`asyncz.ports.MaintenanceStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from asyncz.jobs import NewJob
from asyncz.store.rows import new_job_params
from asyncz.store.runner import QueryRunner

Row = dict[str, Any]
FOLD_PAGE = 10_000  # live count changes moved per statement


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

    async def scan_due_suspended(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        return await self._run.rows(
            "scan_due_suspended",
            {"after_run_at": after[0] if after else None,
             "after_id": after[1] if after else None, "limit": limit},
        )  # fmt: skip

    async def fold_finished_counts(self, lag_seconds: float) -> int:
        """Add the jobs that completed or were cancelled since the last fold (and at least
        ``lag_seconds`` ago) to the per-queue counts; returns how many. Then move the live
        statuses' appended changes into their counts, in bounded pages."""
        folded = await self._fold_finished(lag_seconds)
        while True:
            [page] = await self._run.rows("fold_live_counts", {"limit": FOLD_PAGE})
            if page["moved"] < FOLD_PAGE:
                return folded

    async def _fold_finished(self, lag_seconds: float) -> int:
        # One transaction of two statements: lock the mark, then count with a snapshot taken
        # after the lock.
        async with self._run.transaction("fold_finished_counts") as run:
            marks = await run("lock_fold_mark", {"lag": float(lag_seconds)})
            if not marks or marks[0]["upto"] <= marks[0]["folded_to"]:
                return 0
            rows = await run("fold_finished_counts", marks[0])
            return int(rows[0]["folded"]) if rows else 0

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
        params = {**new_job_params(job_id, new), "slot": slot}
        rows = await self._run.rows("insert_periodic_job", params)
        return rows[0] if rows else None
