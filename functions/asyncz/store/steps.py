"""The PostgreSQL adapter's queries of durable tasks' steps (``sql/steps.sql``) and waits
(``sql/waits.sql``): the store's ``steps`` part (:class:`asyncz.store_ports.StepStore`).
``save`` is the lease fence of a step.

A kind of wait plugs in by SQL: ``open_wait`` runs ``lock_<kind>_wait`` (if named) and then
``open_<kind>_wait`` (else the generic ``open_wait``) in one transaction; resolvers complete
waits with ``resolve_wait`` (one, by job and position) or ``resolve_keyed_waits`` (a page by
routing key), or with those statements inside a transaction of their own (as events do)."""

from __future__ import annotations

import json
from typing import Any

from asyncz.jobs import Lease
from asyncz.port_types import Row
from asyncz.store.queries import QUERIES
from asyncz.store.runner import QueryRunner

NO_JOB = "00000000-0000-0000-0000-000000000000"  # before every job id: a first page


class StepQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run
        self._callback_key: bytes | None = None

    async def save(self, job_id: str, token: str, step: Row) -> bool:
        """Store one step's outcome while the lease holds (``step``: seq, name, kind,
        after_name, status, result as JSON text or None, result_bytes, error, attempts,
        job_attempt, seconds); False: the lease is lost, nothing was stored."""
        row = await self._run.one("save_step", {"job_id": job_id, "token": token, **step})
        return row is not None

    async def open_wait(self, job_id: str, token: str, step: Row) -> Row | None:
        """Store a new wait (``step``: save's keys with ``wait_until``, ``wait_key`` and the
        wait's terms as ``result``) through the lease fence, or complete it at once when its
        kind finds what it waits for already there: the stored ``status`` and ``result``;
        None: the lease is lost."""
        kind = step["kind"]
        params = {"wait_key": None, "job_id": job_id, "token": token, **step}
        async with self._run.transaction("open_wait") as run:
            if f"lock_{kind}_wait" in QUERIES:
                await run(f"lock_{kind}_wait", params)
            opener = f"open_{kind}_wait" if f"open_{kind}_wait" in QUERIES else "open_wait"
            rows = await run(opener, params)
        if rows and rows[0]["status"] == "waiting" and f"settle_{kind}_wait" in QUERIES:
            # what ended while the wait was being stored: counted now it is committed (the
            # kind's own settle, without waking the job: it has not suspended yet)
            async with self._run.transaction("settle_wait") as run:
                await run("lock_waiting_job", params)
                await run(f"settle_{kind}_wait", {**params, "ids": None, "wake": False})
            return await self._run.one("load_step", params)
        return rows[0] if rows else None

    async def resolve(self, job_id: str, seq: int, result: str, size: int) -> Row | None:
        """Complete a waiting step with a value (JSON text of ``size`` bytes) and wake its
        job: the job's id, status, queue, priority, run_at, due; None: it was not waiting
        (a value or its timeout came first) or its job has ended."""
        params = {"job_id": job_id, "seq": seq, "result": result, "result_bytes": size}
        return await self._run.one("resolve_wait", params)

    async def resolve_keyed(self, kind: str, wait_key: str, result: str, size: int,
                            resolver: str | None, after_job: str | None, limit: int
                            ) -> list[Row]:  # fmt: skip
        """A page of the waits of ``kind`` on ``wait_key`` (each job's earliest) after job
        ``after_job``, each completed with the value and its job woken: one row per wait
        scanned (id, status, queue, priority, run_at, due, resolved)."""
        params = {"kind": kind, "wait_key": wait_key, "result": result, "result_bytes": size,
                  "resolver": resolver, "after_job": after_job or NO_JOB,
                  "limit": limit}  # fmt: skip
        return await self._run.rows("resolve_keyed_waits", params)

    async def time_out(self, lease: Lease, seq: int, result: str) -> Row | None:
        """The timeout resolves a wait past its deadline, fenced by the lease: ``timed_out``
        and the wait's ``result`` (the value that came first when it did not); None: the
        lease is lost."""
        params = {"job_id": lease.job_id, "token": lease.token, "seq": seq, "result": result,
                  "result_bytes": len(result), "job_attempt": lease.attempt}  # fmt: skip
        row = await self._run.one("time_out_wait", params)
        if row is None:
            return None
        if row["timed_out"]:
            return {"timed_out": True, "result": json.loads(result)}
        won = await self._run.one("load_step", {"job_id": lease.job_id, "seq": seq})
        return {"timed_out": False, "result": won["result"] if won else None}

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> Row | None:
        """End the attempt suspended until ``delay_seconds`` from now (fenced by the lease;
        a cancel requested meanwhile ends it cancelled): id, status, queue, priority,
        run_at, has_dependents; None: the lease is lost."""
        params = {"id": lease.job_id, "token": lease.token,
                  "delay_seconds": float(delay_seconds), "reason": reason[:500]}  # fmt: skip
        return await self._run.one("suspend_job", params)

    async def load(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        """One page of a job's history after ``after_seq``: seq, name, kind, after_name,
        status, result, result_bytes, attempts, job_attempt, wait_until."""
        return await self._run.rows(
            "load_steps", {"job_id": job_id, "after_seq": after_seq, "limit": limit}
        )

    async def callback_key(self) -> bytes:
        """The key callback tokens are derived under (migration 0022), read once."""
        if self._callback_key is None:
            row = await self._run.one("callback_secret", {})
            if row is None:
                raise RuntimeError("the callback key is missing: run the migrations")
            self._callback_key = bytes(row["secret"])
        return self._callback_key

    async def peek(self, job_id: str, seq: int) -> Row | None:
        """One stored step as it is now: status, result, wait_until."""
        return await self._run.one("peek_step", {"job_id": job_id, "seq": seq})

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
