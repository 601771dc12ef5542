"""Long durable jobs on PostgreSQL and Redis with real worker loops: a step the invocation
has no time left for continues the job at once in a fresh invocation (the worker asks for
one; here that starts another loop, with no fleet at all), each step running once; a worker
short of the longest timeout still claims the jobs whose bound fits and puts back the
others for a worker with time; a step past its bound is a timed-out try, never a loop."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.tasks import TaskContext, task
from asyncz.worker.loop import WorkerLoop
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

CALLS: Counter[str] = Counter()


def _part(i: int) -> int:
    time.sleep(1.0)
    CALLS[f"part:{i}"] += 1
    return i


@task("long_parts", durable=True, timeout_seconds=2)
def _long_parts(payload: dict[str, Any], ctx: TaskContext) -> Any:
    return [ctx.step(f"part:{i}", _part, i) for i in range(4)]


@task("fits_short", timeout_seconds=10)
def _fits_short(payload: dict[str, Any], ctx: TaskContext) -> str:
    return "short"


@task("needs_long", timeout_seconds=600)
def _needs_long(payload: dict[str, Any], ctx: TaskContext) -> str:
    return "long"


@task("overruns", durable=True, timeout_seconds=1)
def _overruns(payload: dict[str, Any], ctx: TaskContext) -> Any:
    def slow() -> str:
        CALLS["slow"] += 1
        time.sleep(1.5)
        return "late"

    return ctx.step("slow", slow)


def _fast(settings: Settings) -> Settings:
    return settings.model_copy(update={"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1,
                                       "worker_poll_seconds": 0.2,
                                       "worker_safety_margin_seconds": 0})  # fmt: skip


def test_a_continuation_asks_for_a_worker_at_once_and_each_step_runs_once(
    settings: Settings,
) -> None:
    CALLS.clear()
    invocations: list[asyncio.Task[dict[str, Any]]] = []

    async def go() -> tuple[Any, list[Any], list[dict[str, Any]]]:
        async with open_service(_fast(settings)) as svc:
            stop = asyncio.Event()

            def invoke() -> None:  # a 3.5-s invocation: two 1-s steps bounded by 2 s fit
                deadline = time.monotonic() + 3.5
                loop = WorkerLoop(svc, remaining_seconds=lambda: deadline - time.monotonic(),
                                  stop=stop, concurrency=2, start_worker=ask)  # fmt: skip
                invocations.append(asyncio.create_task(loop.run()))

            async def ask(broker: Any) -> int:
                invoke()
                return 1

            job_id = (await svc.submit(NewJob(task="long_parts", payload={}))).job_id
            invoke()
            try:
                for _ in range(600):  # at most a minute
                    if (await svc.get(job_id)).status.terminal:
                        break
                    await asyncio.sleep(0.1)
            finally:
                stop.set()
                await asyncio.gather(*invocations)
            return (await svc.get(job_id), await svc.attempts(job_id),
                    await svc.steps(job_id, limit=100))  # fmt: skip

    job, attempts, steps = asyncio.run(go())
    assert (job.status.value, job.result) == ("completed", [0, 1, 2, 3])
    assert {f"part:{i}": 1 for i in range(4)} == CALLS
    outcomes = [a.outcome for a in attempts]
    assert outcomes[-1] == "completed" and set(outcomes[:-1]) == {"suspended"} and outcomes[:-1]
    assert len(invocations) >= 2  # each one past the first was asked for by a continuation
    assert len({a.worker_id for a in attempts}) >= 2
    assert [s["attempts"] for s in steps] == [1] * 4
    assert job.suspensions == len(outcomes) - 1
    assert job.started_at == attempts[0].started_at  # the first start, kept


def test_a_worker_short_of_the_longest_timeout_claims_the_jobs_that_fit(
    settings: Settings,
) -> None:
    async def go() -> tuple[Any, Any, int]:
        asked: list[str] = []

        async def ask(broker: Any) -> int:
            asked.append("worker")
            return 1

        async with open_service(_fast(settings)) as svc:
            long_id = (await svc.submit(NewJob(task="needs_long", payload={}))).job_id
            short_id = (await svc.submit(NewJob(task="fits_short", payload={}))).job_id
            stop = asyncio.Event()
            short = WorkerLoop(svc, remaining_seconds=lambda: 30.0, worker_id="thirty-left",
                               stop=stop, concurrency=1, start_worker=ask)  # fmt: skip
            working = asyncio.create_task(short.run())
            try:
                for _ in range(300):
                    if (await svc.get(short_id)).status.terminal and asked:
                        break
                    await asyncio.sleep(0.1)
                still = await svc.get(long_id)
            finally:
                stop.set()
                await working
            assert (still.status.value, still.attempts) == ("queued", 0)  # put back, unclaimed
            async with running_worker(svc):  # a worker with time takes it
                for _ in range(300):
                    if (await svc.get(long_id)).status.terminal:
                        break
                    await asyncio.sleep(0.1)
            return await svc.get(short_id), await svc.get(long_id), len(asked)

    short_job, long_job, asked = asyncio.run(go())
    assert (short_job.status.value, short_job.worker_id) == ("completed", "thirty-left")
    assert long_job.status.value == "completed" and long_job.worker_id != "thirty-left"
    assert asked == 1  # the short worker asked once for a worker with time


def test_a_step_past_its_bound_is_a_timed_out_try_and_the_job_dies_after_its_retries(
    settings: Settings,
) -> None:
    CALLS.clear()

    async def go() -> tuple[Any, list[Any], list[dict[str, Any]]]:
        async with open_service(_fast(settings)) as svc:
            new = NewJob(task="overruns", payload={}, max_retries=1)
            job_id = (await svc.submit(new)).job_id
            async with running_worker(svc, concurrency=4):
                for _ in range(300):
                    if (await svc.get(job_id)).status.terminal:
                        break
                    await asyncio.sleep(0.1)
            return (await svc.get(job_id), await svc.attempts(job_id),
                    await svc.steps(job_id, limit=100))  # fmt: skip

    job, attempts, steps = asyncio.run(go())
    assert job.status.value == "dead" and job.attempts == 2
    assert [a.outcome for a in attempts] == ["timed_out", "timed_out"]
    assert "step 'slow' exceeded its 1 s timeout" in (job.last_error or "")
    assert steps == []  # its late results were refused
