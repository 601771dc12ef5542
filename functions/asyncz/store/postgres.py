"""PostgreSQL adapter (psycopg 3): the async pool every handler uses. The only module that
imports the driver.

Every state change is one statement from ``sql/queries.sql``, guarded by the lease token
where a worker is involved; zero rows means the caller lost the race.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from asyncz.errors import (
    InvalidInputError,
    QueryTimeoutError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
)
from asyncz.faults import delay_point, delays_armed
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob
from asyncz.store.maintenance import MaintenanceQueries
from asyncz.store.queries import QUERIES
from asyncz.store.rows import attempt_of, job_of, lease_of

log = logging.getLogger("asyncz.store")

Row = dict[str, Any]


class _Sent:
    """Whether the statement left for the server: after that, a lost answer is an unknown
    outcome (it may have committed), before it nothing happened."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


UNAVAILABLE = "database unavailable: try again shortly"


@contextmanager
def _db_errors(bound: float, name: str) -> Iterator[_Sent]:
    """Driver errors as domain errors: unavailable or of unknown outcome (503), cancelled
    at the server's statement timeout, or not storable (422). The driver's text is logged
    here; the error carries a fixed message, safe to show any caller."""
    state = _Sent()
    started = time.monotonic()
    try:
        yield state
    except psycopg.errors.QueryCanceled as exc:  # statement_timeout: rolled back, known
        log.warning("%s cancelled by the server: %s", name, exc)
        raise QueryTimeoutError(
            "the database gave up on this query (its statement timeout): nothing was "
            "changed; narrow the filter or try again shortly"
        ) from exc
    except (psycopg.OperationalError, PoolTimeout, TimeoutError) as exc:
        if isinstance(exc, TimeoutError):
            log.warning("database unavailable: no answer to %s within %g s", name, bound)
        else:
            log.warning("database unavailable (%s): %s", name, exc)
        # An error the server sent (a SQLSTATE: shutting down, terminated) failed the
        # statement: nothing committed. No answer at all after sending may hide a commit.
        if state.sent and getattr(exc, "sqlstate", None) is None:
            # past the bound by more than a moment: psycopg waited on a cancel the server
            # never answered (frozen or unreachable)
            answering = time.monotonic() - started < bound + 1.0
            raise StoreOutcomeUnknownError(UNAVAILABLE, answering=answering) from exc
        raise StoreUnavailableError(UNAVAILABLE) from exc
    except psycopg.DataError as exc:  # e.g. NUL in text, \u0000 in jsonb
        log.warning("value not storable: %s", exc)
        raise InvalidInputError(
            "a value cannot be stored (for example a NUL character in text)"
        ) from exc


def _insert(job_id: str, new: NewJob) -> tuple[str, dict[str, Any]]:
    """The query name and parameters that insert a new job."""
    return (
        "insert_job_idempotent" if new.idempotency_key is not None else "insert_job",
        {
            "id": job_id,
            "task": new.task,
            "payload": Jsonb(new.payload),
            "queue": new.queue,
            "priority": new.priority,
            "max_retries": new.max_retries,
            "timeout_seconds": new.timeout_seconds,
            "idempotency_key": new.idempotency_key,
            "run_at": new.run_at,
            "delay_seconds": float(new.delay_seconds),
        },
    )


# A connection idle for longer than this (a Lambda sandbox frozen between invocations, a
# failover meanwhile) is checked with an empty query before it is handed out, and replaced
# if dead; a busy one is not, so the hot path pays no extra round trip.
IDLE_CHECK_SECONDS = 30.0
_TUPLES_OK = pq.ExecStatus.TUPLES_OK  # a statement that returns rows (even none)
_used_at: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


async def _check_if_idle(conn: Any) -> None:
    if time.monotonic() - _used_at.get(conn, 0.0) > IDLE_CHECK_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


class PostgresStore(MaintenanceQueries):
    """Job persistence on one small async pool per sandbox (opened lazily)."""

    def __init__(self, pool: AsyncConnectionPool[Any], query_timeout: float = 10.0) -> None:
        self._pool = pool
        self._query_timeout = query_timeout

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
            check=_check_if_idle,
        )
        # A server that stops answering (frozen, black-holed network) must not hang a
        # caller: bound the wait for a connection plus the statement. (On cancellation
        # psycopg itself waits at most ~10 s more before it drops the connection.)
        return cls(pool, query_timeout=query_timeout)

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    async def _rows(
        self, name: str, params: Mapping[str, Any] | None = None, *, prepare: bool | None = None
    ) -> list[Row]:
        """Run the named query. ``prepare=False``: planned for these values each time (a
        query whose best index depends on which filters are given)."""
        with _db_errors(self._query_timeout, name) as state:
            async with (
                asyncio.timeout(self._query_timeout),
                self._pool.connection() as conn,
                conn.cursor() as cur,
            ):
                state.sent = True
                await cur.execute(QUERIES[name], params, prepare=prepare)
                if delays_armed():  # chaos: the answer comes late
                    await delay_point(f"store.after.{name}")
                # (not ``cur.description``: it builds a Column object per column per call)
                result = cur.pgresult
                rows = await cur.fetchall() if result and result.status == _TUPLES_OK else []
                _used_at[conn] = time.monotonic()
                return rows

    async def fold_finished_counts(self, lag_seconds: float) -> int:
        """Add the jobs that completed or were cancelled since the last fold (and at least
        ``lag_seconds`` ago) to the per-queue counts; returns how many. One transaction of
        two statements: lock the mark, then count with a snapshot taken after the lock."""
        with _db_errors(self._query_timeout, "fold_finished_counts") as state:
            async with (
                asyncio.timeout(self._query_timeout),
                self._pool.connection() as conn,
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

    async def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = await self._rows(name, params)
        return rows[0] if rows else None

    # --- submit and read -----------------------------------------------------------------

    async def insert_job(self, job_id: str, new: NewJob) -> Row | None:
        """Insert; ``None`` when the idempotency key exists already."""
        return await self._one(*_insert(job_id, new))

    async def insert_jobs(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        """Insert a batch in one statement; per item, in order, its row or ``None`` when its
        idempotency key exists already (or repeats an earlier item's)."""
        news = [new for _, new in items]
        rows = await self._rows(
            "insert_jobs",
            {
                "ids": [job_id for job_id, _ in items],
                "tasks": [n.task for n in news],
                "payloads": [Jsonb(n.payload) for n in news],
                "queues": [n.queue for n in news],
                "priorities": [n.priority for n in news],
                "max_retries": [n.max_retries for n in news],
                "timeouts": [n.timeout_seconds for n in news],
                "keys": [n.idempotency_key for n in news],
                "run_ats": [n.run_at for n in news],
                "delays": [float(n.delay_seconds) for n in news],
            },
        )
        by_id = {str(r["id"]): r for r in rows}
        return [by_id.get(job_id) for job_id, _ in items]

    async def get_by_idempotency_keys(self, keys: Sequence[str]) -> dict[str, Row]:
        """``{key: {"id", "status", "queue", "priority", "run_at", "due"}}`` for the keys
        that exist."""
        rows = await self._rows("get_jobs_by_idempotency_keys", {"keys": list(keys)})
        return {r.pop("idempotency_key"): r for r in rows}

    async def find_jobs(self, ids: Sequence[str]) -> dict[str, Row]:
        """``{id: {"id", "status", "queue", "priority", "run_at", "due"}}`` for the ids that
        exist."""
        return {r["id"]: r for r in await self._rows("find_jobs", {"ids": list(ids)})}

    async def get_by_idempotency_key(self, key: str) -> Row | None:
        return await self._one("get_job_by_idempotency_key", {"idempotency_key": key})

    async def get_job(self, job_id: str) -> Job | None:
        row = await self._one("get_job", {"id": job_id})
        return job_of(row) if row else None

    async def list_attempts(self, job_id: str) -> list[Attempt]:
        return [attempt_of(r) for r in await self._rows("list_attempts", {"id": job_id})]

    async def list_jobs(
        self,
        *,
        status: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[Job]:
        # a task or queue filter alone: merge the ended jobs' index with the live statuses'
        name = "list_jobs_by_task_or_queue" if status is None and (queue or task) else "list_jobs"
        rows = await self._rows(
            name,
            {
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
        rows = await self._rows(
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
        mark = await self._one("get_fold_mark")
        params = {"folded_to": mark["folded_to"] if mark else None}
        return await self._rows("count_by_status", params, prepare=False)

    async def oldest_queued_by_queue(self) -> dict[str, float]:
        return {r["queue"]: r["age"] for r in await self._rows("oldest_queued_by_queue")}

    async def gauges(self) -> Row:
        row = await self._one("queue_gauges")
        assert row is not None
        return row

    async def finished_per_minute(self, minutes: int) -> list[Row]:
        return await self._rows("finished_per_minute", {"minutes": minutes})

    async def count_dead(self) -> int:
        row = await self._one("count_dead")
        return int(row["n"]) if row else 0

    async def ping(self) -> None:
        await self._one("ping")

    # --- worker: claim, heartbeat, finish (fenced by the lease token) ----------------------

    async def claim(self, ids: Sequence[str], worker_id: str, max_timeout: int) -> list[Lease]:
        rows = await self._rows(
            "claim_jobs", {"ids": list(ids), "worker_id": worker_id, "max_timeout": max_timeout}
        )
        return [lease_of(r) for r in rows]

    async def unclaimed(self, ids: Sequence[str]) -> list[Row]:
        return await self._rows("get_unclaimed", {"ids": list(ids)})

    async def heartbeat(self, leases: Sequence[Lease]) -> dict[str, bool]:
        """Renew leases; returns ``{job_id: cancel_requested}`` for those still held."""
        rows = await self._rows(
            "heartbeat_jobs",
            {
                "ids": [lease.job_id for lease in leases],
                "tokens": [lease.token for lease in leases],
            },
        )
        return {str(r["id"]): r["cancel_requested"] for r in rows}

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> set[str]:
        """Complete a batch of attempts in one statement; returns the ids whose lease held."""
        batch = [{"id": lease.job_id, "token": lease.token, "result": r} for lease, r in done]
        try:
            document = json.dumps(batch, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInputError(f"a result is not storable as JSON: {exc}") from None
        rows = await self._rows("complete_jobs", {"done": document})
        return {r["id"] for r in rows}

    async def complete(self, lease: Lease, result: Any) -> bool:
        row = await self._one(
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
        return await self._one(
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
        return await self._one("cancel_job", {"id": job_id})

    async def replay(self, job_id: str) -> Row | None:
        return await self._one("replay_job", {"id": job_id})

    async def replay_dead(self, *, queue: str | None, task: str | None, limit: int) -> list[Row]:
        return await self._rows("replay_dead_jobs", {"queue": queue, "task": task, "limit": limit})

    async def purge_dead(self, job_id: str) -> bool:
        return await self._one("purge_dead_job", {"id": job_id}) is not None
