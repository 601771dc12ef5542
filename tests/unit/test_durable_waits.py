"""The waits of durable tasks on the in-memory store (run_durable and its ManualClock): a
wait suspends the job until its deadline, a resolve wakes it with the value, a replay past
the deadline is resolved by the timeout (once: a value that came first wins), and a job woken
before its deadline with no value waits on until it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from asyncz.durable.waiting import WaitCall
from asyncz.errors import StepUsageError
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import ManualClock, run_durable
from asyncz.testing.durable import DurableRun
from asyncz.testing.steps import MemorySteps

pytestmark = pytest.mark.unit


def _call(timeout: float = 60) -> WaitCall:
    return WaitCall("w", "test", timeout, "test 'w'", key="k", on_timeout="late",
                    decode=lambda v: {"got": v})  # fmt: skip


def _waiter(reg: TaskRegistry, *, is_async: bool = False) -> Any:
    if is_async:

        @task("waiter", durable=True, registry=reg)
        async def awaiter(payload: dict[str, Any], ctx: TaskContext) -> Any:
            assert ctx.journal is not None
            value = await ctx.journal.wait(_call())
            return [value, await ctx.step("after", lambda: "after")]

        return awaiter

    @task("waiter", durable=True, registry=reg)
    def waiter(payload: dict[str, Any], ctx: TaskContext) -> Any:
        assert ctx.journal is not None
        value = ctx.journal.wait(_call())
        return [value, ctx.step("after", lambda: "after")]

    return waiter


def _resolve(run: DurableRun, value: Any) -> bool:
    async def go() -> bool:
        return bool(await run.service.waits.resolve(run.job_id, 1, value))

    return asyncio.run(go())


@pytest.mark.parametrize("is_async", [False, True])
def test_a_wait_suspends_until_its_value_and_returns_it(is_async: bool) -> None:
    reg = TaskRegistry()
    run = run_durable(_waiter(reg, is_async=is_async), registry=reg)
    assert run.status == "suspended" and run.job is not None
    assert run.job.suspended_for is not None
    assert run.job.suspended_for.startswith("test 'w' until 2026-01-01T00:01:00")
    assert [(s["name"], s["kind"], s["status"]) for s in run.steps] == [("w", "test", "waiting")]
    assert _resolve(run, {"ok": 1}) and not _resolve(run, {"ok": 2})  # the first one wins
    run.advance(0)
    assert run.status == "completed" and run.result == [{"got": {"ok": 1}}, "after"]
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]


@pytest.mark.parametrize("is_async", [False, True])
def test_a_wait_past_its_deadline_returns_the_timeouts_value_once(is_async: bool) -> None:
    reg = TaskRegistry()
    run = run_durable(_waiter(reg, is_async=is_async), registry=reg)
    run.advance(30)  # half way: it waits on
    assert run.status == "suspended" and len(run.attempts) == 1
    run.advance(30)
    assert run.status == "completed" and run.result == [{"got": "late"}, "after"]
    assert not _resolve(run, "too late")  # the timeout won
    assert run.steps[0]["status"] == "completed"


def test_a_job_woken_before_its_deadline_with_no_value_waits_on_until_it() -> None:
    reg, clock = TaskRegistry(), ManualClock()
    run = run_durable(_waiter(reg), registry=reg, clock=clock)
    store: Any = run.service.store
    store.jobs[run.job_id]["run_at"] -= timedelta(seconds=60)  # a wake with no value
    run.advance(0)
    assert run.status == "suspended" and [a.outcome for a in run.attempts] == ["suspended"] * 2
    assert run.job is not None and run.job.suspended_for is not None
    assert run.job.suspended_for.endswith("until 2026-01-01T00:01:00+00:00")  # the same deadline
    run.advance(60)
    assert run.status == "completed" and run.result == [{"got": "late"}, "after"]


def test_a_value_resolved_while_the_attempt_runs_wakes_it_at_its_suspension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = TaskRegistry()
    suspend = MemorySteps.suspend

    async def resolved_first(self: MemorySteps, lease: Any, delay: float, reason: str) -> Any:
        if lease.attempt == 1:  # the value commits after the wait is stored, before this
            assert await self.resolve(lease.job_id, 1, '"meanwhile"', 11) is not None
        return await suspend(self, lease, delay, reason)

    monkeypatch.setattr(MemorySteps, "suspend", resolved_first)
    run = run_durable(_waiter(reg), registry=reg)
    # due at once, not at its deadline: the clock never moved
    assert run.status == "completed" and run.result == [{"got": "meanwhile"}, "after"]
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]


@pytest.mark.parametrize("timeout", [0, 0.5, -1, float("nan"), 366 * 86_400, True, "60"])
def test_every_wait_has_a_timeout_of_a_second_to_a_year(timeout: Any) -> None:
    with pytest.raises(StepUsageError, match="every wait has a timeout"):
        WaitCall("w", "test", timeout, "test 'w'")
