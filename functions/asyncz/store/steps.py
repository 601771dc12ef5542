"""The PostgreSQL adapter's queries of durable tasks' steps (``sql/steps.sql``): the store's
``steps`` part (:class:`asyncz.store_ports.StepStore`). ``save`` is the lease fence of a step."""

from __future__ import annotations

from typing import Any

from asyncz.jobs import Lease
from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class StepQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def save(self, job_id: str, token: str, step: Row) -> bool:
        """Store one step's outcome while the lease holds (``step``: seq, name, kind,
        after_name, status, result as JSON text or None, result_bytes, error, attempts,
        job_attempt, seconds); False: the lease is lost, nothing was stored."""
        row = await self._run.one("save_step", {"job_id": job_id, "token": token, **step})
        return row is not None

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> Row | None:
        """End the attempt suspended until ``delay_seconds`` from now (fenced by the lease;
        a cancel requested meanwhile ends it cancelled): id, status, queue, priority,
        run_at, has_dependents; None: the lease is lost."""
        params = {"id": lease.job_id, "token": lease.token,
                  "delay_seconds": float(delay_seconds), "reason": reason[:500]}  # fmt: skip
        return await self._run.one("suspend_job", params)

    async def load(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        """One page of a job's history after ``after_seq``: seq, name, kind, after_name,
        status, result, result_bytes, attempts, job_attempt."""
        return await self._run.rows(
            "load_steps", {"job_id": job_id, "after_seq": after_seq, "limit": limit}
        )

    async def list(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        """One page of a job's steps for people (no results): seq, name, kind, status,
        attempts, job_attempt, started_at, finished_at, duration_ms, result_bytes, error."""
        return await self._run.rows(
            "list_steps", {"job_id": job_id, "after_seq": after_seq, "limit": limit}
        )

    async def reset(self, job_id: str) -> int:
        """Delete a dead job's steps (a replay that starts over); how many went."""
        return len(await self._run.rows("reset_steps", {"job_id": job_id}))

    async def prune(self, kind: str, older_than: float, jobs: int, limit: int) -> int:
        """Up to ``limit`` step rows of the next ``jobs`` jobs retention deletes (``kind``:
        "finished" or "dead"); how many went."""
        params: dict[str, Any] = {"older_than": float(older_than), "jobs": jobs, "limit": limit}
        row = await self._run.one(f"prune_{'dead' if kind == 'dead' else 'finished'}_steps", params)
        return int(row["n"]) if row else 0
