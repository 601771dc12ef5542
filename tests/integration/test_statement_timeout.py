"""PostgreSQL bounds every statement the functions run (``statement_timeout``, sent at
connect): a read that runs past it is cancelled by the server and answered ``504
query_timeout``, a change that runs past it changed nothing; the connection stays usable,
and a worker whose claim or completion was cancelled so goes on (a PostgreSQL thawed from a
freeze cancels every statement that was in flight)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from asyncz.api import handler as api_handler
from asyncz.connections import hash_api_key
from asyncz.errors import (
    OutcomeUnknownError,
    QueryTimeoutError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
)
from asyncz.jobs import Job, JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.store import runner
from tests.support.apigw import call
from tests.support.ledger import rows
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

KEY = "test-key-" + "t" * 24


@pytest.fixture
def bounded(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "db_statement_timeout_seconds": 0.3,
            "db_query_timeout_seconds": 5.0,
            "api_key_hashes": hash_api_key(KEY),
            "wake_worker": False,
        }
    )


@contextmanager
def jobs_locked(settings: Settings) -> Iterator[None]:
    """Another session holds ``jobs`` in ACCESS EXCLUSIVE mode while the block runs: every
    statement on it waits."""
    ready, done = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(settings.database_url or "") as conn:
            conn.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
            ready.set()
            done.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert ready.wait(10)
    try:
        yield
    finally:
        done.set()
        holder.join(10)


@pytest.fixture
def table_locked(bounded: Settings) -> Iterator[None]:
    with jobs_locked(bounded):
        yield


def test_the_connection_carries_the_statement_timeout(bounded: Settings) -> None:
    async def setting() -> Any:
        async with open_service(bounded) as svc:
            pool = svc.store._pool  # type: ignore[attr-defined]
            async with pool.connection() as conn:
                return await (await conn.execute("SHOW statement_timeout")).fetchone()

    assert asyncio.run(setting()) == {"statement_timeout": "300ms"}


def test_a_read_past_the_statement_timeout_is_a_504_query_timeout(
    bounded: Settings, table_locked: None
) -> None:
    box = api_handler.build_sandbox(bounded)
    reply = call(box, "GET", "/jobs?task=echo", api_key=KEY)
    assert reply.status == 504, reply.body
    body = reply.json()
    assert body["error"] == "query_timeout"
    assert "statement timeout" in body["message"] and "canceling" not in body["message"]


def test_a_change_past_the_statement_timeout_changed_nothing(
    bounded: Settings, table_locked: None
) -> None:
    async def submit() -> Exception:
        async with open_service(bounded) as svc:
            try:
                await svc.submit(NewJob(task="echo", payload={}))
            except QueryTimeoutError as exc:
                return exc
            raise AssertionError("the submit was not bounded")

    assert isinstance(asyncio.run(submit()), QueryTimeoutError)


def test_after_a_timeout_the_pool_serves_the_next_statement(bounded: Settings) -> None:
    async def go() -> str:
        async with open_service(bounded) as svc:
            with psycopg.connect(bounded.database_url or "") as conn:
                conn.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(QueryTimeoutError):
                    await svc.list_jobs(task="echo")
                conn.rollback()
            return (await svc.submit(NewJob(task="echo", payload={}))).job_id

    job_id = asyncio.run(go())
    assert rows(bounded.database_url or "", "SELECT id::text AS id FROM jobs") == [{"id": job_id}]


def test_an_error_the_server_sends_is_a_known_failure_not_an_unknown_outcome(
    bounded: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement the server refused with an error of its own (here: the connection was
    terminated, SQLSTATE 57P01) did not commit: the submit is a plain 503, and the pool
    serves the next one."""

    monkeypatch.setattr(runner, "IDLE_CHECK_SECONDS", 3600.0)  # no check before use

    async def go() -> tuple[Exception, str]:
        async with open_service(bounded, pool_max=1) as svc:  # one connection: the killed one
            await svc.list_jobs()  # connected
            with psycopg.connect(bounded.database_url or "", autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            with pytest.raises(StoreUnavailableError) as info:
                await svc.submit(NewJob(task="echo", payload={}))
            return info.value, (await svc.submit(NewJob(task="echo", payload={}))).job_id

    error, job_id = asyncio.run(go())
    assert not isinstance(error, StoreOutcomeUnknownError)
    assert not isinstance(error, OutcomeUnknownError)
    assert rows(bounded.database_url or "", "SELECT id::text AS id FROM jobs") == [{"id": job_id}]


def cancelled_once(
    method: Callable[..., Awaitable[Any]], seen: asyncio.Event
) -> Callable[..., Any]:
    """``method``, setting ``seen`` once the server has cancelled one of its statements."""

    async def spy(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except QueryTimeoutError:
            seen.set()
            raise

    return spy


async def ended(svc: Any, job_id: str, timeout: float = 20.0) -> Job:
    async with asyncio.timeout(timeout):
        while (job := await svc.get(job_id)).status in (JobStatus.QUEUED, JobStatus.PROCESSING):
            await asyncio.sleep(0.05)
    return job


def test_a_claim_cancelled_at_the_statement_timeout_claims_nothing_and_the_worker_goes_on(
    bounded: Settings,
) -> None:
    async def scenario() -> Job:
        async with open_service(bounded) as svc:
            job_id = (await svc.submit(NewJob(task="echo", payload={}))).job_id
            cancelled = asyncio.Event()
            # the claim, or the read before it when a task of this process has limits
            for name in ("claim", "unclaimed"):
                setattr(svc.store, name, cancelled_once(getattr(svc.store, name), cancelled))
            async with running_worker(svc):
                with jobs_locked(bounded):
                    await asyncio.wait_for(cancelled.wait(), 15)
                await svc.recover()  # the id, if the read that puts it back met the lock too
                return await ended(svc, job_id)

    job = asyncio.run(scenario())
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 1, "the cancelled claim started an attempt"


def test_a_completion_cancelled_at_the_statement_timeout_is_written_again(
    bounded: Settings,
) -> None:
    async def scenario() -> Job:
        async with open_service(bounded) as svc:
            job_id = (await svc.submit(NewJob(task="sleep", payload={"seconds": 3}))).job_id
            cancelled = asyncio.Event()
            svc.store.complete_many = cancelled_once(svc.store.complete_many, cancelled)  # type: ignore[method-assign]
            async with running_worker(svc):
                async with asyncio.timeout(15):
                    while (await svc.get(job_id)).status is not JobStatus.PROCESSING:
                        await asyncio.sleep(0.02)
                with jobs_locked(bounded):  # well before the task's 3 s are over
                    await asyncio.wait_for(cancelled.wait(), 15)
                return await ended(svc, job_id)

    job = asyncio.run(scenario())
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 1, "the completion was not written again: recovery re-ran the job"
