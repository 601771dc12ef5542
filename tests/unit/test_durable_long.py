"""Durable jobs longer than one invocation, run in-process against the in-memory store
(run_durable with a short invocation on its ManualClock): a step's bound is the task's
timeout, a step that cannot fit in what the invocation has left continues the job in a
fresh invocation (a worker asked for at once, the stored steps replayed), a step past its
bound is a timed-out try, continuations that make no progress end the job dead, and a worker
short of the longest timeout still claims the jobs whose bound fits."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from asyncz.durable.bounds import MAX_IDLE_CONTINUATIONS
from asyncz.jobs import NewJob
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import ManualClock, run_durable
from asyncz.worker.loop import WorkerLoop
from tests.support import memory

pytestmark = pytest.mark.unit


def _long_job(reg: TaskRegistry, calls: Counter[str], clock: ManualClock, steps: int = 5) -> Any:
    """``steps`` steps of 8 s each (on the test's clock), each bounded by 12 s."""

    @task("long", durable=True, timeout_seconds=12, registry=reg)
    def long(payload: dict[str, Any], ctx: TaskContext) -> list[str]:
        def work(i: int) -> str:
            calls[f"part:{i}"] += 1
            clock.advance(8)
            return f"done {i}"

        return [ctx.step(f"part:{i}", work, i) for i in range(steps)]

    return long


def test_a_job_of_five_8s_steps_completes_across_20s_invocations_each_step_once() -> None:
    reg, calls, clock = TaskRegistry(), Counter[str](), ManualClock()
    run = run_durable(_long_job(reg, calls, clock), registry=reg, clock=clock,
                      timeout_seconds=12, invocation_seconds=20)  # fmt: skip
    assert run.status == "completed"
    assert run.result == [f"done {i}" for i in range(5)]
    assert calls == {f"part:{i}": 1 for i in range(5)}
    # 20 s less the 5 s safety margin: one 8-s step fits with its 12-s bound, a second not
    assert [a.outcome for a in run.attempts] == ["suspended"] * 4 + ["completed"]
    assert run.invocations == 5 and run.workers_asked == 4
    assert [s["job_attempt"] for s in run.steps] == [1, 2, 3, 4, 5]
    assert run.job is not None and run.job.suspensions == 4


def test_with_time_for_two_steps_an_invocation_runs_two_before_it_continues() -> None:
    reg, calls, clock = TaskRegistry(), Counter[str](), ManualClock()
    run = run_durable(_long_job(reg, calls, clock), registry=reg, clock=clock,
                      timeout_seconds=12, invocation_seconds=25,
                      worker_safety_margin_seconds=0)  # fmt: skip
    assert run.status == "completed" and calls == {f"part:{i}": 1 for i in range(5)}
    assert [s["job_attempt"] for s in run.steps] == [1, 1, 2, 2, 3]
    assert [a.outcome for a in run.attempts] == ["suspended", "suspended", "completed"]


def test_a_continuation_shows_what_it_waits_for_and_is_not_a_try() -> None:
    reg, calls, clock = TaskRegistry(), Counter[str](), ManualClock()
    run = run_durable(_long_job(reg, calls, clock, steps=3), registry=reg, clock=clock,
                      timeout_seconds=12, invocation_seconds=20, max_retries=0)  # fmt: skip
    assert run.status == "completed"  # two continuations, no retries: none was a try
    suspended = [a for a in run.attempts if a.outcome == "suspended"]
    assert len(suspended) == 2
    assert run.job is not None  # what it waited for last (its waiting_for while suspended)
    assert run.job.suspended_for == "continuation before step 'part:2'"


def test_continuations_that_store_no_step_end_the_job_dead_naming_the_step() -> None:
    reg, clock = TaskRegistry(), ManualClock()

    @task("stuck", durable=True, timeout_seconds=12, registry=reg)
    def stuck(payload: dict[str, Any], ctx: TaskContext) -> str:
        clock.advance(10)  # code outside a step leaves no invocation time for the step
        return str(ctx.step("fetch", lambda: "never"))

    run = run_durable(stuck, registry=reg, clock=clock, timeout_seconds=12,
                      invocation_seconds=20, max_retries=5)  # fmt: skip
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("no_progress: step 'fetch' could not start")
    outcomes = [a.outcome for a in run.attempts]
    assert outcomes == ["suspended"] * (MAX_IDLE_CONTINUATIONS - 1) + ["failed"]
    assert run.steps == []


def test_an_async_step_past_its_bound_times_out_and_the_job_dies_after_its_retries() -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    @task("hang", durable=True, timeout_seconds=1, registry=reg)
    async def hang(payload: dict[str, Any], ctx: TaskContext) -> str:
        async def forever() -> str:
            calls["forever"] += 1
            await asyncio.sleep(60)
            return "never"

        try:
            return str(await ctx.step("forever", forever))
        except Exception:  # noqa: BLE001 - the point: the verdict outlives this
            return "swallowed"

    run = run_durable(hang, registry=reg, timeout_seconds=1, max_retries=1)
    assert run.status == "dead" and calls == {"forever": 2}
    assert [a.outcome for a in run.attempts] == ["timed_out", "timed_out"]
    assert run.error is not None and "step 'forever' exceeded its 1 s timeout" in run.error


def test_a_durable_task_runs_longer_than_its_timeout_when_each_step_fits() -> None:
    reg, clock = TaskRegistry(), ManualClock()

    @task("patient", durable=True, timeout_seconds=1, registry=reg)
    async def patient(payload: dict[str, Any], ctx: TaskContext) -> str:
        await asyncio.sleep(1.5)  # between steps: past the 1-s bound of one step
        return str(await ctx.step("quick", lambda: "ok"))

    run = run_durable(patient, registry=reg, clock=clock, timeout_seconds=1)
    assert run.status == "completed" and run.result == "ok"


def test_a_worker_with_30s_left_runs_the_10s_job_and_puts_the_600s_one_back() -> None:
    svc = memory.service(worker_safety_margin_seconds=0, worker_poll_seconds=0.05)
    svc.registry.register("fits", lambda payload, ctx: "fits", timeout_seconds=10)
    svc.registry.register("too_long", lambda payload, ctx: "long", timeout_seconds=600)
    asked: list[int] = []

    async def ask(broker: object) -> int:
        asked.append(1)
        return 1

    async def go() -> tuple[Any, Any]:
        too_long = (await svc.submit(NewJob(task="too_long", payload={}))).job_id  # first in line
        fits = (await svc.submit(NewJob(task="fits", payload={}))).job_id
        stop = asyncio.Event()
        worker = WorkerLoop(svc, remaining_seconds=lambda: 30.0, stop=stop, concurrency=1,
                            start_worker=ask)  # fmt: skip
        working = asyncio.create_task(worker.run())
        for _ in range(200):
            if (await svc.get(fits)).status.terminal and asked:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await working
        return await svc.get(fits), await svc.get(too_long)

    fits, too_long = asyncio.run(go())
    assert fits.status.value == "completed"
    assert (too_long.status.value, too_long.attempts) == ("queued", 0)
    assert asked == [1]  # it asked once for a worker with time
