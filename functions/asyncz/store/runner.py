"""Running the named statements (:mod:`asyncz.store.queries`) on the pool: each bounded in
time, each driver error turned into a domain error whose text is safe to show anyone. The
store's parts (:class:`asyncz.store.postgres.PostgresStore`,
:class:`asyncz.store.maintenance.MaintenanceQueries`) share one runner."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from asyncz.errors import (
    InvalidInputError,
    QueryTimeoutError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
)
from asyncz.faults import delay_point, delays_armed
from asyncz.store.queries import QUERIES

log = logging.getLogger("asyncz.store")

Row = dict[str, Any]
Statement = Callable[..., Awaitable[list[Row]]]  # (name, params=None) -> rows


class _Sent:
    """Whether the statement left for the server: after that, a lost answer is an unknown
    outcome (it may have committed), before it nothing happened."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


UNAVAILABLE = "database unavailable: try again shortly"


@contextmanager
def db_errors(bound: float, name: str) -> Iterator[_Sent]:
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


# A connection idle for longer than this (a Lambda sandbox frozen between invocations, a
# failover meanwhile) is checked with an empty query before it is handed out, and replaced
# if dead; a busy one is not, so the hot path pays no extra round trip.
IDLE_CHECK_SECONDS = 30.0
_TUPLES_OK = pq.ExecStatus.TUPLES_OK  # a statement that returns rows (even none)
_used_at: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


async def check_if_idle(conn: Any) -> None:
    if time.monotonic() - _used_at.get(conn, 0.0) > IDLE_CHECK_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


class QueryRunner:
    def __init__(self, pool: AsyncConnectionPool[Any], query_timeout: float) -> None:
        self.pool = pool
        self.query_timeout = query_timeout

    async def rows(
        self, name: str, params: Mapping[str, Any] | None = None, *, prepare: bool | None = None
    ) -> list[Row]:
        """Run the named query. ``prepare=False``: planned for these values each time (a
        query whose best index depends on which filters are given)."""
        with db_errors(self.query_timeout, name) as state:
            async with (
                asyncio.timeout(self.query_timeout),
                self.pool.connection() as conn,
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

    async def one(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = await self.rows(name, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def transaction(self, name: str) -> AsyncIterator[Statement]:
        """Several named statements in one transaction (bounded in time as one): yields
        ``run(name, params)``; an exception in the block rolls it all back."""
        with db_errors(self.query_timeout, name) as state:
            async with (
                asyncio.timeout(self.query_timeout),
                self.pool.connection() as conn,
                conn.transaction(),
                conn.cursor() as cur,
            ):
                state.sent = True

                async def run(query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
                    await cur.execute(QUERIES[query], params)
                    result = cur.pgresult
                    return await cur.fetchall() if result and result.status == _TUPLES_OK else []

                yield run
                _used_at[conn] = time.monotonic()
