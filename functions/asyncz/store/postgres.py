"""PostgreSQL adapter (psycopg 3): the async pool every handler uses, and the blocking
connection of the api's submit lane. The only module that imports the driver.

Every state change is one statement from ``sql/queries.sql``, guarded by the lease token
where a worker is involved; zero rows means the caller lost the race.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from asyncz.errors import InvalidInputError, StoreUnavailableError
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob
from asyncz.store.queries import QUERIES

log = logging.getLogger("asyncz.store")

Row = dict[str, Any]


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def _job(row: Mapping[str, Any]) -> Job:
    return Job(
        id=str(row["id"]),
        task=row["task"],
        payload=row["payload"],
        queue=row["queue"],
        priority=row["priority"],
        status=JobStatus(row["status"]),
        attempts=row["attempts"],
        attempt_base=row["attempt_base"],
        max_retries=row["max_retries"],
        timeout_seconds=row["timeout_seconds"],
        idempotency_key=row["idempotency_key"],
        run_at=row["run_at"].astimezone(UTC),
        lease_token=str(row["lease_token"]) if row["lease_token"] else None,
        worker_id=row["worker_id"],
        heartbeat_at=_utc(row["heartbeat_at"]),
        cancel_requested=row["cancel_requested"],
        result=row["result"],
        last_error=row["last_error"],
        created_at=row["created_at"].astimezone(UTC),
        started_at=_utc(row["started_at"]),
        finished_at=_utc(row["finished_at"]),
        updated_at=row["updated_at"].astimezone(UTC),
    )


def _attempt(row: Mapping[str, Any]) -> Attempt:
    return Attempt(
        job_id=str(row["job_id"]),
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        started_at=row["started_at"].astimezone(UTC),
        finished_at=_utc(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]) if row["outcome"] else None,
        error=row["error"],
        duration_ms=row["duration_ms"],
    )


def _lease(row: Mapping[str, Any]) -> Lease:
    return Lease(
        job_id=str(row["id"]),
        token=str(row["lease_token"]),
        task=row["task"],
        payload=row["payload"],
        queue=row["queue"],
        priority=row["priority"],
        attempt=row["attempts"],
        attempt_base=row["attempt_base"],
        max_retries=row["max_retries"],
        timeout_seconds=row["timeout_seconds"],
    )


@contextmanager
def _db_errors(bound: float) -> Iterator[None]:
    """Driver errors as domain errors: unavailable (503) or not storable (422). The driver's
    text is logged here; the error carries a fixed message, safe to show any caller."""
    try:
        yield
    except (psycopg.OperationalError, PoolTimeout) as exc:
        log.warning("database unavailable: %s", exc)
        raise StoreUnavailableError("database unavailable: try again shortly") from exc
    except TimeoutError as exc:
        log.warning("database unavailable: no answer within %g s", bound)
        raise StoreUnavailableError("database unavailable: try again shortly") from exc
    except psycopg.DataError as exc:  # e.g. NUL in text, \u0000 in jsonb
        log.warning("value not storable: %s", exc)
        raise InvalidInputError(
            "a value cannot be stored (for example a NUL character in text)"
        ) from exc


def _insert(job_id: str, new: NewJob) -> tuple[str, dict[str, Any]]:
    """The query name and parameters that insert a new job (both stores use them)."""
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


_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


class _LibpqInsert:
    """A new job's INSERT sent through libpq itself (``pgconn.exec_prepared``), for the
    submit lane.

    psycopg's cursor machinery (the placeholder conversion, the adapters, its wait loop, the
    row maker) costs about 110 µs of CPU per INSERT here, twice what libpq spends sending it
    and reading the answer (BENCHMARKS.md, "Submit over HTTP"). The statement is the same
    named query, its ``%(name)s`` placeholders numbered; parameters travel as text, and the
    answer is the two columns the query returns (``run_at_ms``, ``due``). An error comes
    back as the exception psycopg raises for it, so :func:`_db_errors` maps it as before.
    """

    def __init__(self, query: str) -> None:
        self.name = f"asyncz_{query}".encode()
        self.params: list[str] = []

        def number(m: re.Match[str]) -> str:
            if m.group(1) not in self.params:
                self.params.append(m.group(1))
            return f"${self.params.index(m.group(1)) + 1}"

        self.sql = _PLACEHOLDER.sub(number, QUERIES[query]).encode()

    def args(self, values: Mapping[str, Any]) -> list[bytes | None]:
        return [_text(values[name]) for name in self.params]

    def run(self, pgconn: Any, values: Mapping[str, Any], *, prepared: bool) -> Row | None:
        args = self.args(values)
        if prepared:
            res = pgconn.exec_prepared(self.name, args)
        else:
            res = pgconn.exec_params(self.sql, args)
        _check(pgconn, res, pq.ExecStatus.TUPLES_OK)
        if res.ntuples == 0:
            return None
        return {"run_at_ms": int(res.get_value(0, 0)), "due": res.get_value(0, 1) == b"t"}

    def prepare(self, pgconn: Any) -> None:
        _check(pgconn, pgconn.prepare(self.name, self.sql, None), pq.ExecStatus.COMMAND_OK)


def _text(value: Any) -> bytes | None:
    """A parameter in Postgres's text format. A NUL cannot travel in one (libpq would cut
    the string there): it is refused, as psycopg refuses it."""
    if value is None:
        return None
    if isinstance(value, Jsonb):
        text = json.dumps(value.obj)
    elif isinstance(value, datetime):
        text = value.isoformat()
    else:
        text = str(value)
    if "\x00" in text:
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return text.encode()


def _check(pgconn: Any, res: Any, expected: pq.ExecStatus) -> None:
    if res.status == expected:
        return
    if pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(pgconn.get_error_message() or "connection lost")
    # the exception psycopg itself raises for this result (class by SQLSTATE, same message)
    raise psycopg.errors.error_from_result(res)


class PostgresStore:
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
    ) -> PostgresStore:
        """Build the store; no connection is made until :meth:`open`."""
        kwargs: dict[str, Any] = {"autocommit": True, "row_factory": dict_row}
        if not prepare:  # RDS Proxy pins a session that uses server-side prepared statements
            kwargs["prepare_threshold"] = None
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs=kwargs,
            reconnect_timeout=60,
            name="asyncz",
        )
        # A server that stops answering (frozen, black-holed network) must not hang a
        # caller: bound the wait for a connection plus the statement. (On cancellation
        # psycopg itself waits at most ~10 s more before it drops the connection.)
        return cls(pool, query_timeout=query_timeout)

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    async def _rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        with _db_errors(self._query_timeout):
            async with (
                asyncio.timeout(self._query_timeout),
                self._pool.connection() as conn,
                conn.cursor() as cur,
            ):
                await cur.execute(QUERIES[name], params)
                return await cur.fetchall() if cur.description else []

    async def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = await self._rows(name, params)
        return rows[0] if rows else None

    # --- submit and read -----------------------------------------------------------------

    async def insert_job(self, job_id: str, new: NewJob) -> Row | None:
        """Insert; ``None`` when the idempotency key exists already."""
        return await self._one(*_insert(job_id, new))

    async def get_by_idempotency_key(self, key: str) -> Row | None:
        return await self._one("get_job_by_idempotency_key", {"idempotency_key": key})

    async def get_job(self, job_id: str) -> Job | None:
        row = await self._one("get_job", {"id": job_id})
        return _job(row) if row else None

    async def list_attempts(self, job_id: str) -> list[Attempt]:
        return [_attempt(r) for r in await self._rows("list_attempts", {"id": job_id})]

    async def list_jobs(
        self,
        *,
        status: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[Job]:
        rows = await self._rows(
            "list_jobs",
            {
                "status": status,
                "queue": queue,
                "task": task,
                "limit": limit,
                "after_created": after[0] if after else None,
                "after_id": after[1] if after else None,
            },
        )
        return [_job(r) for r in rows]

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
        return [_job(r) for r in rows]

    async def counts_by_status(self) -> list[Row]:
        return await self._rows("count_by_status")

    async def oldest_queued_by_queue(self) -> dict[str, float]:
        return {r["queue"]: r["age"] for r in await self._rows("oldest_queued_by_queue")}

    async def gauges(self) -> Row:
        row = await self._one("queue_gauges")
        assert row is not None
        return row

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
        return [_lease(r) for r in rows]

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
        rows = await self._rows(
            "complete_jobs",
            {
                "ids": [lease.job_id for lease, _ in done],
                "tokens": [lease.token for lease, _ in done],
                "results": [Jsonb(result) for _, result in done],
            },
        )
        return {str(r["id"]) for r in rows}

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

    # --- recovery ------------------------------------------------------------------------

    async def recover_stale_leases(self, lease_timeout: float, limit: int) -> list[Row]:
        return await self._rows(
            "recover_stale_leases", {"lease_timeout": float(lease_timeout), "limit": limit}
        )

    async def scan_queued(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        return await self._rows(
            "scan_queued",
            {
                "after_run_at": after[0] if after else None,
                "after_id": after[1] if after else None,
                "limit": limit,
            },
        )


class _Deadline:
    """Bounds blocking calls on a socket: one past its deadline gets the socket shut down
    (both directions), so the driver's wait ends with an error instead of hanging on a
    frozen or black-holed server. A daemon thread, started at first use and gone once its
    deadline object is, looks a few times a second; arming and disarming take an
    uncontended lock."""

    TICK_SECONDS = 0.2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd = -1
        self._until = 0.0
        self._thread: threading.Thread | None = None
        self.fired = False  # the socket was shut down: the connection is unusable

    @contextmanager
    def armed(self, fd: int, seconds: float) -> Iterator[None]:
        if self._thread is None:
            self._thread = threading.Thread(
                target=_watch, args=(weakref.ref(self),), name="asyncz-deadline", daemon=True
            )
            self._thread.start()
        with self._lock:
            self._fd, self._until = fd, time.monotonic() + seconds
        try:
            yield
        finally:
            with self._lock:
                self._until = 0.0

    def check(self) -> None:
        with self._lock:
            if not self._until or time.monotonic() < self._until:
                return
            self._until = 0.0
            self.fired = True
            # a dup shares the socket: shutting it down ends the driver's wait
            with suppress(OSError), socket.socket(fileno=os.dup(self._fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)


def _watch(ref: weakref.ref[_Deadline]) -> None:
    while True:
        time.sleep(_Deadline.TICK_SECONDS)
        deadline = ref()
        if deadline is None:
            return
        deadline.check()
        del deadline


_LANE_INSERTS = {name: _LibpqInsert(name) for name in ("insert_job", "insert_job_idempotent")}


class PostgresSubmitStore:
    """The api Lambda's submit lane: one blocking connection per sandbox.

    A Lambda sandbox serves one request at a time, so async I/O buys the hot path nothing,
    and under load the event loop's machinery cost more CPU than the INSERT itself
    (BENCHMARKS.md, "Submit"). The methods keep :class:`asyncz.ports.SubmitStore`'s async
    signatures but never suspend: run them with :func:`asyncz.runtime.drive`.

    Every statement is bounded by ``query_timeout`` (see :class:`_Deadline`); a connection
    idle for longer than ``check_after`` (a thawed sandbox, a failover meanwhile) is checked
    with an empty query before it carries an INSERT, and replaced if it is dead.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        query_timeout: float = 10.0,
        prepare: bool = True,
        check_after: float = 30.0,
    ) -> None:
        """``conninfo`` carries the connect timeout (see asyncz.connections)."""
        self._conninfo = conninfo
        self._query_timeout = query_timeout
        self._prepare = prepare
        self._check_after = check_after
        self._conn: psycopg.Connection[Row] | None = None
        self._used_at = 0.0
        self._deadline = _Deadline()
        self._prepared: set[bytes] = set()  # lane INSERTs prepared on this connection

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._prepared.clear()

    def _connection(self) -> psycopg.Connection[Row]:
        conn = self._conn
        if conn is not None and (
            conn.broken
            or conn.closed
            or self._deadline.fired
            or conn.pgconn.status != pq.ConnStatus.OK  # lost under a libpq-level INSERT
        ):
            self.close()
            conn = None
        elif conn is not None and time.monotonic() - self._used_at > self._check_after:
            try:
                with self._deadline.armed(conn.fileno(), self._query_timeout):
                    conn.execute("")
            except psycopg.Error:
                self.close()
                conn = None
        if conn is None:
            self._deadline.fired = False
            conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                row_factory=dict_row,
                prepare_threshold=5 if self._prepare else None,
            )
            self._conn = conn
        return conn

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Row]]:
        """The connection for one statement, bounded by the deadline; errors mapped."""
        with _db_errors(self._query_timeout):
            conn = self._connection()
            try:
                with self._deadline.armed(conn.fileno(), self._query_timeout):
                    yield conn
            except psycopg.OperationalError as exc:
                if self._deadline.fired:  # we shut the socket: say why
                    raise TimeoutError from exc
                raise
            self._used_at = time.monotonic()

    def _one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        with self._session() as conn:
            return conn.execute(QUERIES[name], params).fetchone()  # lane statements return rows

    def _insert_row(self, name: str, params: Mapping[str, Any]) -> Row | None:
        insert = _LANE_INSERTS[name]
        with self._session() as conn:
            pgconn = conn.pgconn
            if not self._prepare:
                return insert.run(pgconn, params, prepared=False)
            if insert.name not in self._prepared:
                insert.prepare(pgconn)
                self._prepared.add(insert.name)
            try:
                return insert.run(pgconn, params, prepared=True)
            except psycopg.errors.InvalidSqlStatementName:  # forgotten: DISCARD ALL, a pooler
                insert.prepare(pgconn)
                return insert.run(pgconn, params, prepared=True)

    async def insert_job(self, job_id: str, new: NewJob) -> Row | None:
        """Insert; ``None`` when the idempotency key exists already."""
        return self._insert_row(*_insert(job_id, new))

    async def get_by_idempotency_key(self, key: str) -> Row | None:
        return self._one("get_job_by_idempotency_key", {"idempotency_key": key})
