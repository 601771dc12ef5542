"""A durable task's sleep on PostgreSQL and Redis with a real worker loop: while it sleeps
no worker runs the job and its concurrency slot runs another job; it wakes through the
delayed set with no recovery run, and through recovery after Redis lost its id; a job that
suspended five times still has its retries; cancel ends a sleeping job at once; a woken job
whose task is gone goes to the DLQ as unknown_task."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
import redis

from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.tasks import TaskContext, task
from asyncz.tasks.registry import REGISTRY
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

CALLS: Counter[str] = Counter()
SLEEP = 5.0  # seconds: a few, so the other job surely runs inside the sleep


def _mark(name: str) -> str:
    CALLS[name] += 1
    return name


@task("sleepy_one_at_a_time", durable=True, concurrency=1, max_retries=0)
def _sleepy(payload: dict[str, Any], ctx: TaskContext) -> str:
    n = payload["n"]
    ctx.step("before", _mark, f"{n}:before")
    if payload.get("sleep"):
        ctx.sleep("nap", seconds=payload["sleep"])
    return str(ctx.step("after", _mark, f"{n}:after"))


@task("napping_then_flaky", durable=True)
def _napping_then_flaky(payload: dict[str, Any], ctx: TaskContext) -> str:
    for i in range(5):
        ctx.sleep(f"nap:{i}", seconds=1)
    CALLS["flaky"] += 1
    if CALLS["flaky"] == 1:
        raise RuntimeError("the first real failure")
    return "done"


@task("vanishing_sleeper", durable=True)
def _vanishing(payload: dict[str, Any], ctx: TaskContext) -> str:
    ctx.sleep("nap", seconds=1)
    return "never"


def _fast(settings: Settings) -> Settings:
    return settings.model_copy(update={"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1,
                                       "worker_poll_seconds": 0.2})  # fmt: skip


async def _until(svc: Any, job_id: str, done: Callable[[Any], bool], what: str) -> Any:
    for _ in range(600):  # a bound against a hang, not a figure: ~60 s
        job = await svc.get(job_id)
        if done(job):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never {what}: {job.status}")


async def _gone(worker: Any, job_id: str) -> None:
    for _ in range(100):  # a bound against a hang, not a figure: ~10 s
        if job_id not in worker.running:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the worker still runs {job_id} after its suspension committed")


def _row(url: str, job_id: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        cur = conn.execute("SELECT status, lease_token, run_at <= now() AS due "
                           "FROM jobs WHERE id = %s", (job_id,))  # fmt: skip
        status, token, due = cur.fetchone() or (None, None, None)
    return {"status": status, "lease_token": token, "due": due}


def _run(settings: Settings, body: Callable[[Any, Any], Awaitable[None]]) -> None:
    async def go() -> None:
        async with open_service(_fast(settings)) as svc, running_worker(svc) as worker:
            await body(svc, worker)

    asyncio.run(go())


def test_a_sleeping_job_holds_no_worker_its_slot_runs_another_and_it_wakes_by_the_delayed_set(
    settings: Settings,
) -> None:
    CALLS.clear()
    url = settings.database_url or ""

    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="sleepy_one_at_a_time", payload={"n": "a", "sleep": SLEEP})
        sleeper = (await svc.submit(new)).job_id
        await _until(svc, sleeper, lambda j: j.status is JobStatus.SUSPENDED, "suspended")
        row = _row(url, sleeper)
        assert (row["status"], row["lease_token"], row["due"]) == ("suspended", None, False)
        # the worker lets go of it once its suspension committed (a moment after, at most)
        await _gone(worker, sleeper)
        reason = await svc.held_reason(await svc.get(sleeper))  # GET /jobs/{id}'s waiting_for
        assert reason.startswith("sleep 'nap' until ")
        # the task's one concurrency slot is free: another job of it runs meanwhile
        other = (await svc.submit(NewJob(task="sleepy_one_at_a_time", payload={"n": "b"}))).job_id
        await _until(svc, other, lambda j: j.status.terminal, "ended")
        assert (await svc.get(other)).status is JobStatus.COMPLETED
        assert (await svc.get(sleeper)).status is JobStatus.SUSPENDED  # still asleep
        # no recovery runs here: the worker's promotion of the delayed set wakes it
        job = await _until(svc, sleeper, lambda j: j.status.terminal, "woke")
        assert (job.status, job.result, job.attempts, job.suspensions) == (
            JobStatus.COMPLETED, "a:after", 2, 1)  # fmt: skip
        attempts = await svc.attempts(sleeper)
        assert [a.outcome for a in attempts] == ["suspended", "completed"]
        assert job.started_at == attempts[0].started_at  # the job's first start

    _run(settings, body)
    assert CALLS == {"a:before": 1, "b:before": 1, "b:after": 1, "a:after": 1}


def test_a_sleeping_job_whose_id_redis_lost_wakes_through_recovery(settings: Settings) -> None:
    CALLS.clear()
    url = settings.database_url or ""

    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="sleepy_one_at_a_time", payload={"n": "c", "sleep": 1})
        job_id = (await svc.submit(new)).job_id
        await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED, "suspended")
        # the suspension commits, then its id goes to the delayed set: flush after both (the
        # worker lets go of the job once they are done), or the id may land after the flush
        await _gone(worker, job_id)
        redis.Redis.from_url(settings.redis_url or "").flushdb()  # the wake's id is gone
        for _ in range(100):
            if _row(url, job_id)["due"]:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the worker polls on: nothing in Redis wakes it
        assert (await svc.get(job_id)).status is JobStatus.SUSPENDED
        report = await svc.recover()
        assert report.reenqueued >= 1 and not report.failed
        job = await _until(svc, job_id, lambda j: j.status.terminal, "woke")
        assert (job.status, job.result) == (JobStatus.COMPLETED, "c:after")

    _run(settings, body)
    assert CALLS == {"c:before": 1, "c:after": 1}


def test_a_job_that_suspended_five_times_still_retries_its_first_real_failure(
    settings: Settings, api: Any
) -> None:
    CALLS.clear()

    made: list[str] = []

    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="napping_then_flaky", payload={}, max_retries=1)
        made.append(job_id := (await svc.submit(new)).job_id)
        job = await _until(svc, job_id, lambda j: j.status.terminal, "ended")
        assert (job.status, job.result, job.attempts) == (JobStatus.COMPLETED, "done", 7)

    _run(settings, body)
    assert CALLS == {"flaky": 2}
    attempts = api("GET", f"/jobs/{made[0]}/attempts").json()["items"]
    assert [a["outcome"] for a in attempts] == ["suspended"] * 5 + ["failed", "completed"]


def test_cancel_ends_a_sleeping_job_at_once(settings: Settings, api: Any) -> None:
    CALLS.clear()

    made: list[str] = []

    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="sleepy_one_at_a_time", payload={"n": "d", "sleep": 3600})
        made.append(job_id := (await svc.submit(new)).job_id)
        await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED, "suspended")

    _run(settings, body)
    job_id = made[0]
    shown = api("GET", f"/jobs/{job_id}").json()
    assert shown["status"] == "suspended" and shown["waiting_for"].startswith("sleep 'nap' until")
    listed = api("GET", "/jobs?status=suspended").json()["items"]
    assert [j["job_id"] for j in listed] == [job_id]
    reply = api("POST", f"/jobs/{job_id}/cancel")
    assert reply.status == 200 and reply.json()["status"] == "cancelled"
    shown = api("GET", f"/jobs/{job_id}").json()
    assert shown["status"] == "cancelled" and shown["finished_at"] is not None
    attempts = api("GET", f"/jobs/{job_id}/attempts").json()["items"]
    assert [a["outcome"] for a in attempts] == ["suspended"]
    assert CALLS == {"d:before": 1}


def test_a_woken_job_whose_task_is_gone_is_dead_as_unknown_task(settings: Settings) -> None:
    spec = REGISTRY.get("vanishing_sleeper")

    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="vanishing_sleeper", payload={}, max_retries=3)
        job_id = (await svc.submit(new)).job_id
        await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED, "suspended")
        REGISTRY._tasks.pop("vanishing_sleeper")  # the next deploy no longer has it
        job = await _until(svc, job_id, lambda j: j.status.terminal, "ended")
        assert job.status is JobStatus.DEAD
        assert job.last_error == "unknown_task: unknown task 'vanishing_sleeper'"
        assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "failed"]

    try:
        _run(settings, body)
    finally:
        REGISTRY._tasks["vanishing_sleeper"] = spec
