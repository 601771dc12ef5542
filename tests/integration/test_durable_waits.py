"""Durable tasks' waits on PostgreSQL and Redis: a resolve and the attempt's suspension
racing on the job's row (either may commit first, and the job wakes at once either way), a
crash between a resolve's commit and its enqueue (recovery enqueues the due row), and a
wait resolved by the service with a real worker loop running the task."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import redis

from asyncz.durable.waiting import WaitCall
from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.store.queries import QUERIES
from asyncz.tasks import TaskContext, task
from tests.support.contract import new
from tests.support.settings import open_service
from tests.support.waits_contract import wait
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration


@task("waits_for_a_test_value", durable=True)
def _waits(payload: dict[str, Any], ctx: TaskContext) -> Any:
    assert ctx.journal is not None
    value = ctx.journal.wait(WaitCall("w", "test", payload["timeout"], "test 'w'", key="k"))
    return {"value": value}


async def _waiting(svc: Any) -> tuple[str, Any]:
    """A job whose attempt has stored its wait and not suspended yet."""
    job_id = str(uuid.uuid4())
    await svc.store.insert_job(job_id, new())
    [lease] = await svc.store.claim([job_id], "w", 3600)
    assert await svc.store.steps.open_wait(job_id, lease.token, wait(1, "w1"))
    return job_id, lease


async def _held_then(url: str, query: str, params: dict[str, Any],
                     other: Callable[[], Any]) -> tuple[list[Any], Any]:  # fmt: skip
    """Run ``query`` in a transaction held open while ``other()`` starts and blocks on the
    job's row, then commit: what each answered."""
    with psycopg.connect(url) as conn:
        held = conn.execute(QUERIES[query], params).fetchall()
        pid = conn.info.backend_pid
        other_task = asyncio.create_task(other())
        waiters = 0
        for _ in range(500):  # a bound against a hang: the other statement reaches the lock
            await asyncio.sleep(0.01)
            with psycopg.connect(url, autocommit=True) as probe:
                waiters = probe.execute(  # the backends this transaction blocks
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                    (pid,),
                ).fetchone()[0]  # type: ignore[index]
            if waiters:
                break
        assert waiters and not other_task.done()  # it waits for this transaction
        conn.commit()
    return held, await other_task


def _run(settings: Settings, body: Callable[[Any], Any]) -> None:
    async def go() -> None:
        async with open_service(settings) as svc:
            await body(svc)

    asyncio.run(go())


def test_a_resolve_that_commits_while_the_suspension_waits_wakes_the_job_at_once(
    settings: Settings,
) -> None:
    url = settings.database_url or ""

    async def body(svc: Any) -> None:
        job_id, lease = await _waiting(svc)
        params = {"job_id": job_id, "seq": 1, "result": '"v"', "result_bytes": 3}
        suspend = lambda: svc.store.steps.suspend(lease, 3600.0, "x")  # noqa: E731
        held, suspended = await _held_then(url, "resolve_wait", params, suspend)
        assert [r[1] for r in held] == ["processing"]  # the attempt ran: marked woken
        assert suspended["status"] == "suspended" and suspended["due"]  # wakes now
        assert [w.job_id for w in await svc.store.claim([job_id], "w2", 3600)] == [job_id]

    _run(settings, body)


def test_a_suspension_that_commits_while_the_resolve_waits_is_made_due_by_it(
    settings: Settings,
) -> None:
    url = settings.database_url or ""

    async def body(svc: Any) -> None:
        job_id, lease = await _waiting(svc)
        params = {"id": job_id, "token": lease.token, "delay_seconds": 3600.0, "reason": "x"}
        resolve = lambda: svc.store.steps.resolve(job_id, 1, '"v"', 3)  # noqa: E731
        held, woke = await _held_then(url, "suspend_job", params, resolve)
        assert held[0][1] == "suspended" and not held[0][5]  # suspended for an hour...
        assert woke is not None and woke["status"] == "suspended"  # ...and the resolve saw it
        [lease2] = await svc.store.claim([job_id], "w2", 3600)  # due now
        [step] = await svc.store.steps.load(job_id, 0, 10)
        assert (lease2.job_id, step["status"], step["result"]) == (job_id, "completed", "v")

    _run(settings, body)


def test_a_crash_between_a_resolve_and_its_enqueue_is_mended_by_recovery(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(point: str) -> None:
        if point == "resolve.before_enqueue":
            raise SystemExit("the process died here")

    monkeypatch.setattr("asyncz.service.waits.crash_point", crash)

    async def body(svc: Any) -> None:
        job_id, lease = await _waiting(svc)
        await svc.store.steps.suspend(lease, 3600.0, "test 'w1'")
        redis.Redis.from_url(settings.redis_url or "").flushdb()  # not even the delayed id
        with pytest.raises(SystemExit):
            await svc.waits.resolve(job_id, 1, {"ok": True})
        assert await svc.broker.pop(["default"], 1, 0.2) == []  # nothing enqueued it
        report = await svc.recover()
        assert report.reenqueued == 1 and not report.failed
        assert await svc.broker.pop(["default"], 1, 1.0) == [job_id]
        assert [w.job_id for w in await svc.store.claim([job_id], "w2", 3600)] == [job_id]

    _run(settings, body)


def test_a_waiting_task_is_resumed_by_the_service_with_the_value(settings: Settings) -> None:
    async def body(svc: Any) -> None:
        async with running_worker(svc):
            job_id = (await svc.submit(NewJob(task="waits_for_a_test_value",
                                              payload={"timeout": 3600}))).job_id  # fmt: skip
            job = await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED)
            assert (await svc.held_reason(job)).startswith("test 'w' until ")
            assert await svc.waits.resolve(job_id, 1, [1, 2])
            assert not await svc.waits.resolve(job_id, 1, [3])  # the first commit won
            job = await _until(svc, job_id, lambda j: j.status.terminal)
            assert (job.status, job.result) == (JobStatus.COMPLETED, {"value": [1, 2]})
            assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "completed"]

    _run(settings, body)


async def _until(svc: Any, job_id: str, done: Callable[[Any], bool]) -> Any:
    for _ in range(300):  # a bound against a hang, not a figure
        job = await svc.get(job_id)
        if done(job):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id}: {job.status}")
