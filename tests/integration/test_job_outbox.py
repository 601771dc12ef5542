"""The outbox of lifecycle events in PostgreSQL: every end of a job (and every replay) writes
exactly one row in the transaction that made it, on every path; a change that rolls back
writes none; a change that is not an end writes none."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.store.queries import QUERIES
from tests.support.ledger import rows
from tests.support.settings import open_service

pytestmark = pytest.mark.integration


def _events(settings: Settings, job_id: str) -> list[dict[str, Any]]:
    return rows(
        settings.database_url or "",
        "SELECT type, status, task, queue, attempts, finished_at "
        "FROM job_outbox WHERE job_id = %s ORDER BY created_at, type",
        (job_id,),
    )


def _types(settings: Settings, job_id: str) -> list[str]:
    return [e["type"] for e in _events(settings, job_id)]


async def _claim(svc: Any, job_id: str) -> Any:
    [lease] = await svc.claim_next("w-1", ["default"], 1, 2.0, 3600)
    assert lease.job_id == job_id
    return lease


def test_a_completion_writes_one_completed_event_with_the_jobs_fields(settings: Settings) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="echo", payload={"a": 1}))
            assert _types(settings, sub.job_id) == []  # a submit is not an end
            lease = await _claim(svc, sub.job_id)
            await svc.heartbeat([lease])
            assert _types(settings, sub.job_id) == []  # nor a claim or a heartbeat
            assert await svc.complete(lease, {"ok": True})
            return sub.job_id

    job_id = asyncio.run(scenario())
    [event] = _events(settings, job_id)
    assert (event["type"], event["status"], event["task"], event["queue"]) == (
        "asyncz.job.completed", "completed", "echo", "default")  # fmt: skip
    assert event["attempts"] == 1 and event["finished_at"] is not None


def test_a_batch_completion_writes_one_event_a_job(settings: Settings) -> None:
    async def scenario() -> list[str]:
        async with open_service(settings) as svc:
            ids = [(await svc.submit(NewJob(task="echo", payload={}))).job_id for _ in range(3)]
            leases = await svc.claim_next("w-1", ["default"], 3, 2.0, 3600)
            assert await svc.complete_many([(lease, None) for lease in leases]) == set(ids)
            return ids

    for job_id in asyncio.run(scenario()):
        assert _types(settings, job_id) == ["asyncz.job.completed"]


def test_a_retry_writes_no_event(settings: Settings) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=1))
            done = await svc.fail(await _claim(svc, sub.job_id), "boom")
            assert done is not None and done.status is JobStatus.QUEUED
            return sub.job_id

    assert _types(settings, asyncio.run(scenario())) == []


@pytest.mark.parametrize("outcome", [AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT])
def test_the_last_failure_or_timeout_writes_one_dead_event(
    settings: Settings, outcome: AttemptOutcome
) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=0))
            done = await svc.fail(await _claim(svc, sub.job_id), "boom", outcome)
            assert done is not None and done.status is JobStatus.DEAD
            return sub.job_id

    job_id = asyncio.run(scenario())
    [event] = _events(settings, job_id)
    assert (event["type"], event["attempts"]) == ("asyncz.job.dead", 1)


def test_a_lost_lease_with_no_tries_left_writes_one_dead_event(settings: Settings) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="echo", payload={}, max_retries=0))
            await _claim(svc, sub.job_id)
            rows(settings.database_url,
                 "UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
                 (sub.job_id,))  # fmt: skip
            assert _types(settings, sub.job_id) == []
            report = await svc.recover()
            assert sub.job_id in report.dead
            await svc.recover()  # a second sweep finds nothing to end again
            return sub.job_id

    assert _types(settings, asyncio.run(scenario())) == ["asyncz.job.dead"]


def test_cancels_write_one_cancelled_event_whether_queued_or_running(settings: Settings) -> None:
    async def scenario() -> tuple[str, str]:
        async with open_service(settings) as svc:
            running = await svc.submit(NewJob(task="echo", payload={}))
            lease = await _claim(svc, running.job_id)
            queued = await svc.submit(NewJob(task="echo", payload={}))
            assert await svc.cancel(queued.job_id) is JobStatus.CANCELLED
            assert await svc.cancel(running.job_id) is JobStatus.PROCESSING  # flagged only
            assert _types(settings, running.job_id) == []  # a flag is not an end
            done = await svc.fail(lease, "stopped", AttemptOutcome.CANCELLED)
            assert done is not None and done.status is JobStatus.CANCELLED
            return queued.job_id, running.job_id

    for job_id in asyncio.run(scenario()):
        assert _types(settings, job_id) == ["asyncz.job.cancelled"]


def test_a_replay_writes_one_replayed_event_and_its_next_end_another(settings: Settings) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=0))
            await svc.fail(await _claim(svc, sub.job_id), "boom")
            await svc.replay(sub.job_id)
            assert await svc.complete(await _claim(svc, sub.job_id), None)
            return sub.job_id

    job_id = asyncio.run(scenario())
    assert [(e["type"], e["status"]) for e in _events(settings, job_id)] == [
        ("asyncz.job.dead", "dead"), ("asyncz.job.replayed", "queued"),
        ("asyncz.job.completed", "completed")]  # fmt: skip


def test_a_bulk_replay_writes_one_replayed_event_a_job(settings: Settings) -> None:
    async def scenario() -> list[str]:
        async with open_service(settings) as svc:
            ids = []
            for _ in range(3):
                sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=0))
                await svc.fail(await _claim(svc, sub.job_id), "boom")
                ids.append(sub.job_id)
            assert sorted(await svc.replay_dead(limit=10)) == sorted(ids)
            return ids

    for job_id in asyncio.run(scenario()):
        assert _types(settings, job_id) == ["asyncz.job.dead", "asyncz.job.replayed"]


def test_a_rolled_back_completion_writes_no_event(settings: Settings) -> None:
    async def submit_and_claim() -> Any:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="echo", payload={}))
            return await _claim(svc, sub.job_id)

    lease = asyncio.run(submit_and_claim())
    conn = psycopg.connect(settings.database_url or "")
    with conn, pytest.raises(RuntimeError), conn.transaction():
        [done] = conn.execute(
            QUERIES["complete_job"],
            {"id": lease.job_id, "token": uuid.UUID(lease.token), "result": None},
        ).fetchall()
        assert done[0] is not None  # completed inside the transaction, with its row
        assert conn.execute("SELECT count(*) FROM job_outbox").fetchone() == (1,)
        raise RuntimeError("the worker dies before the commit")
    assert _types(settings, lease.job_id) == []
    [job] = rows(settings.database_url, "SELECT status FROM jobs WHERE id = %s", (lease.job_id,))
    assert job["status"] == "processing"
