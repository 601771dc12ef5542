"""The PostgreSQL adapter's queries of spawned jobs (``sql/spawns.sql``): the store's
``spawns`` part (:class:`asyncz.wait_ports.SpawnStore`). ``insert`` is fenced by the
spawner's lease, as a step's write is."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from asyncz.jobs import Job, Lease, NewJob
from asyncz.port_types import Row
from asyncz.store.rows import job_of, new_job_params
from asyncz.store.runner import QueryRunner
from asyncz.store.unique import unique_params


class SpawnQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def insert(self, lease: Lease, job_id: str, new: NewJob, max_depth: int) -> Row | None:
        """Store the spawned job ``job_id`` while ``lease`` holds: ``too_deep``,
        ``inserted`` (False: a job holds its id or one of its keys), ``run_at_ms``, ``due``;
        None: the lease is lost."""
        params = {**new_job_params(job_id, new), **unique_params(new), "max_depth": max_depth,
                  "parent_id": lease.job_id, "token": lease.token}  # fmt: skip
        return await self._run.one("insert_spawned_job", params)

    async def find(self, job_id: str, new: NewJob) -> Row | None:
        """The job holding this id, else its idempotency key, else its unique key."""
        params = {"id": job_id, "idempotency_key": new.idempotency_key,
                  "unique_key": new.unique_key}  # fmt: skip
        return await self._run.one("find_spawned", params)

    async def cascade(self, ended_ids: Sequence[str], limit: int) -> list[Row]:
        """A cascade's page over these ended jobs: the live jobs the cancelled ones spawned,
        cancelled (at most ``limit``; ``kind`` "cancelled"), and the gatherers that have not
        counted them yet (``kind`` "gatherer": :meth:`settle` each)."""
        return await self._run.rows("cascade_spawned", {"ids": list(ended_ids), "limit": limit})

    async def settle(self, gatherer_id: str, ended_ids: Sequence[str] | None, *,
                     wake: bool = True) -> list[Row]:  # fmt: skip
        """Count these ended jobs (None: every ended one) for the gatherer's waits, under its
        row lock; the gatherer, when a wait of it was completed (and ``wake``)."""
        params = {"job_id": gatherer_id, "wake": wake,
                  "ids": None if ended_ids is None else list(ended_ids)}  # fmt: skip
        async with self._run.transaction("settle_gather_wait") as run:
            await run("lock_waiting_job", params)
            return await run("settle_gather_wait", params)

    async def waiting_gatherers(self, after: str, limit: int) -> list[str]:
        """Recovery: a page of the jobs with a waiting gather, by id after ``after``."""
        rows = await self._run.rows("scan_waiting_gathers", {"after": after, "limit": limit})
        return [r["job_id"] for r in rows]

    async def progress(self, job_id: str) -> Row | None:
        """A gathering job's waiting gather: its ``name``, ``pending`` and ``total`` jobs."""
        return await self._run.one("gather_progress", {"id": job_id})

    async def count(self, job_id: str, limit: int) -> dict[str, int]:
        """A spawner's jobs by status, counting at most ``limit``."""
        rows = await self._run.rows("count_spawned", {"id": job_id, "limit": limit})
        return {r["status"]: r["n"] for r in rows}

    async def list(self, spawner_id: str, after: tuple[datetime, str] | None,
                   limit: int) -> list[Job]:  # fmt: skip
        """A page of a spawner's jobs, newest first, after the cursor's position."""
        at, job_id = after if after else (None, None)
        params = {"spawned_by": spawner_id, "after_at": at, "after_id": job_id, "limit": limit}
        return [job_of(r) for r in await self._run.rows("list_spawned", params)]
