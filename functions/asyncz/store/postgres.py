"""PostgreSQL adapter (psycopg 3): the job store on one async pool per sandbox, which every
handler uses. Only this package (``asyncz.store``) imports the driver.

Every state change is one statement from ``sql/queries.sql``, guarded by the lease token
where a worker is involved; zero rows means the caller lost the race.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from asyncz.errors import InvalidInputError
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob
from asyncz.store.access import AccessQueries
from asyncz.store.activity import ActivityQueries
from asyncz.store.callbacks import CallbackQueries
from asyncz.store.dependencies import DependencyQueries
from asyncz.store.events import EventQueries
from asyncz.store.limits import LimitQueries
from asyncz.store.maintenance import MaintenanceQueries
from asyncz.store.outbox import OutboxQueries
from asyncz.store.rows import (
    STRICT_JSON,
    attempt_of,
    job_of,
    lease_of,
    new_job_params,
    new_jobs_document,
)
from asyncz.store.runner import QueryRunner, check_if_idle
from asyncz.store.spawns import SpawnQueries
from asyncz.store.steps import StepQueries
from asyncz.store.unique import UniqueQueries
from asyncz.store.webhooks import WebhookQueries

log = logging.getLogger("asyncz.store")

Row = dict[str, Any]


def _insert(job_id: str, new: NewJob) -> tuple[str, dict[str, Any]]:
    """The query name and parameters that insert a new job."""
    name = "insert_job_idempotent" if new.idempotency_key is not None else "insert_job"
    return name, new_job_params(job_id, new)


class PostgresStore:
    """Job persistence on one small async pool per sandbox (opened lazily)."""

    def __init__(self, pool: AsyncConnectionPool[Any], query_timeout: float = 10.0) -> None:
        self._pool = pool
        self._run = QueryRunner(pool, query_timeout)
        self.maintenance = MaintenanceQueries(self._run)
        self.dependencies = DependencyQueries(self._run)
        self.limits = LimitQueries(self._run)
        self.access = AccessQueries(self._run)
        self.activity = ActivityQueries(self._run)
        self.unique = UniqueQueries(self._run)
        self.steps = StepQueries(self._run)
        self.events = EventQueries(self._run)
        self.callbacks = CallbackQueries(self._run)
        self.spawns = SpawnQueries(self._run)
        self.webhooks = WebhookQueries(self._run)
        self.outbox = OutboxQueries(self._run)

    @classmethod
    def create(
        cls,
        conninfo: str,
        *,
        min_size: int = 1,
        max_size: int = 2,
        timeout: float = 5.0,
        prepare: bool = True,
        query_timeout: float = 10.0,
        statement_timeout: float = 0.0,
        password: Callable[[], str] | None = None,
        max_idle: float = 600.0,
    ) -> PostgresStore:
        """Build the store; no connection is made until :meth:`open`. ``password``, when
        given, is asked for each new connection (IAM auth tokens expire);
        ``statement_timeout`` (seconds, 0 = none) is the server's bound on each statement."""
        fixed: dict[str, Any] = {"autocommit": True, "row_factory": dict_row}
        if statement_timeout > 0:  # a startup parameter: no round trip, no SET to pin
            fixed["options"] = f"-c statement_timeout={max(1, int(statement_timeout * 1000))}"
        if not prepare:  # RDS Proxy pins a session that uses server-side prepared statements
            fixed["prepare_threshold"] = None
        kwargs: dict[str, Any] | Callable[[], dict[str, Any]] = fixed
        if password is not None:
            kwargs = lambda: {**fixed, "password": password()}  # noqa: E731
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs=kwargs,
            reconnect_timeout=60,
            max_idle=max_idle,
            name="asyncz",
            check=check_if_idle,
        )
        # A server that stops answering (frozen, black-holed network) must not hang a
        # caller: bound the wait for a connection plus the statement. (On cancellation
        # psycopg itself waits at most ~10 s more before it drops the connection.)
        return cls(pool, query_timeout=query_timeout)

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    # --- submit and read -----------------------------------------------------------------

    async def insert_job(self, job_id: str, new: NewJob) -> Row | None:
        """Insert; ``None`` when the idempotency key exists already."""
        return await self._run.one(*_insert(job_id, new))

    async def insert_jobs(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        """Insert a batch in one statement; per item, in order, its row or ``None`` when its
        idempotency key exists already (or repeats an earlier item's)."""
        rows = await self._run.rows("insert_jobs", {"jobs": new_jobs_document(items)})
        by_id = {str(r["id"]): r for r in rows}
        return [by_id.get(job_id) for job_id, _ in items]

    async def get_by_idempotency_keys(self, keys: Sequence[str]) -> dict[str, Row]:
        """``{key: {"id", "status", "queue", "priority", "run_at", "due"}}`` for the keys
        that exist."""
        rows = await self._run.rows("get_jobs_by_idempotency_keys", {"keys": list(keys)})
        return {r.pop("idempotency_key"): r for r in rows}

    async def find_jobs(self, ids: Sequence[str]) -> dict[str, Row]:
        """``{id: {"id", "status", "queue", "priority", "run_at", "due"}}`` for the ids that
        exist."""
        return {r["id"]: r for r in await self._run.rows("find_jobs", {"ids": list(ids)})}

    async def get_by_idempotency_key(self, key: str) -> Row | None:
        return await self._run.one("get_job_by_idempotency_key", {"idempotency_key": key})

    async def get_job(self, job_id: str) -> Job | None:
        row = await self._run.one("get_job", {"id": job_id})
        return job_of(row) if row else None

    async def list_attempts(self, job_id: str) -> list[Attempt]:
        return [attempt_of(r) for r in await self._run.rows("list_attempts", {"id": job_id})]

    async def list_jobs(
        self,
        *,
        status: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
        submitted_by: str | None = None,
        submitted_by_key_id: str | None = None,
    ) -> list[Job]:
        # a task or queue filter alone: merge the ended jobs' index with the live statuses'
        name = "list_jobs_by_task_or_queue" if status is None and (queue or task) else "list_jobs"
        if submitted_by is not None or submitted_by_key_id is not None:  # along their index
            name = "list_jobs_by_submitter"
        rows = await self._run.rows(
            name,
            {
                "submitted_by": submitted_by,
                "submitted_by_key_id": submitted_by_key_id,
                "status": status,
                "queue": queue,
                "task": task,
                "limit": limit,
                "after_created": after[0] if after else None,
                "after_id": after[1] if after else None,
            },
            prepare=False,
        )
        return [job_of(r) for r in rows]

    async def list_dead(
        self, *, queue: str | None, task: str | None, limit: int, after: tuple[datetime, str] | None
    ) -> list[Job]:
        rows = await self._run.rows(
            "list_dead_jobs",
            {
                "queue": queue,
                "task": task,
                "limit": limit,
                "after_finished": after[0] if after else None,
                "after_id": after[1] if after else None,
            },
        )
        return [job_of(r) for r in rows]

    async def counts_by_status(self) -> list[Row]:
        mark = await self._run.one("get_fold_mark")
        params = {"folded_to": mark["folded_to"] if mark else None}
        return await self._run.rows("count_by_status", params, prepare=False)

    async def oldest_queued_by_queue(self, queues: Sequence[str]) -> dict[str, float]:
        ages = {}
        for queue in queues:  # one statement a queue, each planned for its own name
            rows = await self._run.rows("oldest_queued_in_queue", {"queue": queue}, prepare=False)
            if rows and rows[0]["age"] is not None:
                ages[queue] = rows[0]["age"]
        return ages

    async def gauges(self) -> Row:
        row = await self._run.one("queue_gauges")
        assert row is not None
        return row

    async def finished_per_minute(self, minutes: int) -> list[Row]:
        # planned for its window each time (a generic plan cannot tell an hour from a year)
        return await self._run.rows("finished_per_minute", {"minutes": minutes}, prepare=False)

    async def cost_counts(self) -> list[Row]:
        return await self._run.rows("cost_counts")

    async def count_dead(self) -> int:
        row = await self._run.one("count_dead")
        return int(row["n"]) if row else 0

    async def ping(self) -> None:
        await self._run.one("ping")

    # --- worker: claim, heartbeat, finish (fenced by the lease token) ----------------------

    async def claim(
        self, ids: Sequence[str], worker_id: str, max_timeout: int, nonce: str | None = None
    ) -> list[Lease]:
        params = {"ids": list(ids), "worker_id": worker_id, "max_timeout": max_timeout,
                  "nonce": nonce or uuid.uuid4().hex}  # fmt: skip
        return [lease_of(r) for r in await self._run.rows("claim_jobs", params)]

    async def adopt(self, ids: Sequence[str], nonce: str) -> list[Lease]:
        rows = await self._run.rows("adopt_claim", {"ids": list(ids), "nonce": nonce})
        return [lease_of(r) for r in rows]

    async def unclaimed(self, ids: Sequence[str]) -> list[Row]:
        return await self._run.rows("get_unclaimed", {"ids": list(ids)})

    async def heartbeat(self, leases: Sequence[Lease]) -> dict[str, bool]:
        """Renew leases; returns ``{job_id: cancel_requested}`` for those still held."""
        rows = await self._run.rows(
            "heartbeat_jobs",
            {
                "ids": [lease.job_id for lease in leases],
                "tokens": [lease.token for lease in leases],
            },
        )
        return {str(r["id"]): r["cancel_requested"] for r in rows}

    async def save_progress(self, reports: Sequence[tuple[Lease, float, str | None]]) -> set[str]:
        """Store each attempt's latest progress (fenced); returns the ids whose lease held."""
        rows = await self._run.rows(
            "save_progress",
            {
                "ids": [lease.job_id for lease, _, _ in reports],
                "tokens": [lease.token for lease, _, _ in reports],
                "fractions": [fraction for _, fraction, _ in reports],
                "messages": [message for _, _, message in reports],
            },
        )
        return {str(r["id"]) for r in rows}

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> dict[str, bool]:
        """Complete a batch of attempts in one statement; returns the ids whose lease held,
        each with whether it has dependents."""
        batch = [{"id": lease.job_id, "token": lease.token, "result": r} for lease, r in done]
        try:
            document = STRICT_JSON.encode(batch)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInputError(f"a result is not storable as JSON: {exc}") from None
        rows = await self._run.rows("complete_jobs", {"done": document})
        return {r["id"]: r["has_dependents"] for r in rows}

    async def complete(self, lease: Lease, result: Any) -> bool:
        row = await self._run.one(
            "complete_job", {"id": lease.job_id, "token": lease.token, "result": Jsonb(result)}
        )
        return row is not None

    async def finish_failed(
        self,
        lease: Lease,
        *,
        status: JobStatus,
        outcome: AttemptOutcome,
        error: str,
        delay_seconds: float = 0.0,
    ) -> Row | None:
        return await self._run.one(
            "finish_failed_job",
            {
                "id": lease.job_id,
                "token": lease.token,
                "status": str(status),
                "outcome": str(outcome),
                "error": error,
                "delay_seconds": float(delay_seconds),
            },
        )

    # --- operator actions --------------------------------------------------------------

    async def cancel(self, job_id: str) -> Row | None:
        return await self._run.one("cancel_job", {"id": job_id})

    async def replay(self, job_id: str) -> Row | None:
        return await self._run.one("replay_job", {"id": job_id})

    async def replay_dead(self, *, queue: str | None, task: str | None, limit: int) -> list[Row]:
        return await self._run.rows(
            "replay_dead_jobs", {"queue": queue, "task": task, "limit": limit}
        )

    async def purge_dead(self, job_id: str) -> bool:
        return await self._run.one("purge_dead_job", {"id": job_id}) is not None
