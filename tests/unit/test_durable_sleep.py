"""A durable task's sleep, run in-process against the in-memory store (run_durable and its
ManualClock): the job suspends (no attempt runs it, its slot is free), the clock's advance
wakes it, the sleep replays as done, and a suspension is never counted as a try."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from asyncz.jobs import JobStatus, NewJob
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import ManualClock, MemoryBroker, MemoryStore, run_durable

pytestmark = pytest.mark.unit


def _reminder(reg: TaskRegistry, calls: Counter[str], seconds: float = 3600) -> Any:
    @task("remind", durable=True, registry=reg)
    def remind(payload: dict[str, Any], ctx: TaskContext) -> str:
        ctx.step("note", calls.update, ["note"])
        ctx.sleep("cool-off", seconds=seconds)
        ctx.step("send", calls.update, ["send"])
        return "sent"

    return remind


def test_a_sleep_suspends_the_job_until_the_clock_reaches_its_wake_time() -> None:
    reg, calls = TaskRegistry(), Counter[str]()
    run = run_durable(_reminder(reg, calls), registry=reg)
    assert run.status == "suspended" and calls == {"note": 1}
    assert run.job is not None and run.job.suspensions == 1
    assert [a.outcome for a in run.attempts] == ["suspended"]
    assert run.job.suspended_for is not None and "sleep 'cool-off' until" in run.job.suspended_for
    first_start = run.job.started_at

    run.advance(1800)  # half way: it sleeps on, nothing runs
    assert run.status == "suspended" and calls == {"note": 1}
    assert len(run.attempts) == 1

    run.advance(1800)
    assert run.status == "completed" and run.result == "sent"
    assert calls == {"note": 1, "send": 1}  # the step before the sleep ran once
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]
    assert run.job is not None and run.job.started_at == first_start  # the job's first start
    assert [(s["name"], s["kind"]) for s in run.steps] == [
        ("note", "step"), ("cool-off", "sleep"), ("send", "step")]  # fmt: skip


def test_an_async_task_sleeps_with_await_and_until_a_time() -> None:
    reg, clock = TaskRegistry(), ManualClock()
    wake = clock.now() + timedelta(days=2)

    @task("later", durable=True, registry=reg)
    async def later(payload: dict[str, Any], ctx: TaskContext) -> str:
        await ctx.sleep("until", until=wake)
        return (await ctx.now("woke")).isoformat()

    run = run_durable(later, registry=reg, clock=clock)
    assert run.status == "suspended"
    run.advance(2 * 86_400)
    assert run.status == "completed" and run.result == wake.isoformat()


def test_a_job_that_suspends_five_times_still_has_all_its_retries() -> None:
    reg, fails = TaskRegistry(), Counter[str]()

    def flaky() -> str:
        fails["flaky"] += 1
        if fails["flaky"] == 1:
            raise RuntimeError("first real failure")
        return "done"

    @task("naps", durable=True, registry=reg)
    def naps(payload: dict[str, Any], ctx: TaskContext) -> str:
        for i in range(5):
            ctx.sleep(f"nap:{i}", seconds=10)
        return str(ctx.step("flaky", flaky))

    run = run_durable(naps, max_retries=1, registry=reg)
    for _ in range(5):
        assert run.status == "suspended"
        run.advance(10)
    assert run.status == "completed" and run.result == "done"
    outcomes = [a.outcome for a in run.attempts]
    assert outcomes == ["suspended"] * 5 + ["failed", "completed"]
    assert run.job is not None and run.job.attempts == 7  # every attempt, wakes included


def test_the_same_job_with_no_retries_left_dies_at_its_first_real_failure() -> None:
    reg = TaskRegistry()

    @task("naps_then_fail", durable=True, registry=reg)
    def naps_then_fail(payload: dict[str, Any], ctx: TaskContext) -> None:
        for i in range(5):
            ctx.sleep(f"nap:{i}", seconds=10)
        raise RuntimeError("always")

    run = run_durable(naps_then_fail, max_retries=1, registry=reg)
    for _ in range(5):
        run.advance(10)
    assert run.status == "dead" and run.error == "RuntimeError: always"
    assert [a.outcome for a in run.attempts] == ["suspended"] * 5 + ["failed", "failed"]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"seconds": 0.5}, "a sleep lasts 1 s to"),
        ({"seconds": 366 * 86_400}, "a sleep lasts 1 s to"),
        ({"until": "past"}, "in the past"),
        ({}, "give seconds= or until="),
    ],
)
def test_a_sleep_out_of_range_or_in_the_past_ends_the_job_dead_saying_why(
    kwargs: dict[str, Any], says: str
) -> None:
    reg, clock = TaskRegistry(), ManualClock()
    if kwargs.get("until") == "past":
        kwargs = {"until": clock.now() - timedelta(minutes=5)}

    @task("bad_sleep", durable=True, registry=reg)
    def bad_sleep(payload: dict[str, Any], ctx: TaskContext) -> None:
        ctx.sleep("nap", **kwargs)

    run = run_durable(bad_sleep, max_retries=3, registry=reg, clock=clock)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage: sleep 'nap'") and says in run.error
    assert len(run.attempts) == 1  # a usage error is final: no retry


def test_a_task_that_catches_the_suspension_still_suspends_and_runs_no_step_after() -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    @task("sneaky", durable=True, registry=reg)
    def sneaky(payload: dict[str, Any], ctx: TaskContext) -> str:
        with contextlib.suppress(Exception):  # what a careless task does
            ctx.sleep("nap", seconds=60)
        with contextlib.suppress(Exception):
            ctx.step("after", calls.update, ["after"])
        return "returned"

    run = run_durable(sneaky, registry=reg)
    assert run.status == "suspended" and calls == {}
    run.advance(60)
    assert run.status == "completed" and calls == {"after": 1}


def _service(reg: TaskRegistry) -> tuple[JobService, MemoryStore, MemoryBroker]:
    store, broker = MemoryStore(), MemoryBroker()
    settings = Settings(database_url="postgresql://unused", redis_url="redis://unused")
    return JobService(store, broker, reg, settings, rand=lambda: 0.0), store, broker  # type: ignore[arg-type]


def test_cancel_of_a_suspended_job_ends_it_at_once_and_its_wake_claims_nothing() -> None:
    reg, calls = TaskRegistry(), Counter[str]()
    _reminder(reg, calls, seconds=1)
    service, store, _ = _service(reg)

    async def go() -> None:
        job_id = (await service.submit(NewJob(task="remind", payload={}))).job_id
        [lease] = await service.claim_next("w", ["default"], 1, 0.1, 900)
        row = await store.steps.suspend(lease, 0.0, "sleep 'cool-off' until soon")
        assert row is not None and row["status"] == "suspended"
        assert await service.cancel(job_id) is JobStatus.CANCELLED
        job = await service.get(job_id)
        assert job.status is JobStatus.CANCELLED and job.finished_at is not None
        await service.enqueue_quietly([{**row, "due": True}])  # a wake popped after it
        assert await service.claim_next("w", ["default"], 1, 0.1, 900) == []

    asyncio.run(go())


def test_a_woken_job_whose_task_is_gone_goes_to_the_dlq_as_unknown_task() -> None:
    reg, calls = TaskRegistry(), Counter[str]()
    run = run_durable(_reminder(reg, calls), max_retries=3, registry=reg)
    assert run.status == "suspended"
    run.service.registry = TaskRegistry()  # the next deploy no longer has the task
    run.advance(3600)
    assert run.status == "dead" and run.error == "unknown_task: unknown task 'remind'"
    assert [a.outcome for a in run.attempts] == ["suspended", "failed"]


def test_a_wake_takes_a_concurrency_slot_but_not_a_rate_start() -> None:
    from asyncz.port_types import Slot
    from asyncz.tasks.limits import Rate, TaskLimits

    broker = MemoryBroker()
    broker.limits.rebuilt = True
    limits = TaskLimits(concurrency=1, rate=Rate(1, 60))

    def slot(job_id: str, *, wake: bool) -> Slot:
        return Slot(job_id, job_id + "-t", "t", None, "default", 0, limits, wake=wake)

    async def go() -> None:
        assert await broker.limits.acquire([slot("a", wake=False)], 60) == ["ok"]
        await broker.limits.release([slot("a", wake=False)])
        # the rate's one start a minute is spent: a new start waits, a wake does not
        assert await broker.limits.acquire([slot("b", wake=False)], 60) == ["rate"]
        assert await broker.limits.acquire([slot("c", wake=True)], 60) == ["ok"]
        # and the wake holds the task's one concurrency slot while it runs
        assert await broker.limits.acquire([slot("d", wake=True)], 60) == ["concurrency"]

    asyncio.run(go())


def test_a_step_retry_further_off_than_the_worker_waits_suspends_the_job_until_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg, clock, calls = TaskRegistry(), ManualClock(), Counter[str]()
    monkeypatch.setattr(random, "random", lambda: 1.0)  # the jitter: each wait its ceiling

    def busy() -> str:
        calls["busy"] += 1
        if calls["busy"] < 3:
            raise ConnectionError("rate limited upstream")
        return "answer"

    @task("patient", durable=True, registry=reg)
    async def patient(payload: dict[str, Any], ctx: TaskContext) -> str:
        return str(await ctx.step("ask", busy, retries=3, backoff=60.0))

    # the waits are 60 s, then 120 s: each longer than a worker waits
    run = run_durable(patient, registry=reg, clock=clock, max_retries=0)
    assert run.status == "suspended" and calls == {"busy": 1} and clock.slept == []
    assert run.job is not None and run.job.suspended_for is not None
    assert run.job.suspended_for.startswith("retry of step 'ask' at ")
    [step] = run.steps
    assert (step["status"], step["attempts"]) == ("failed", 1)
    run.advance(30)  # not yet
    assert run.status == "suspended" and calls == {"busy": 1}
    run.advance(30)
    assert run.status == "suspended" and calls == {"busy": 2}  # its second run failed too
    run.advance(120)
    assert run.status == "completed" and run.result == "answer" and calls == {"busy": 3}
    assert [a.outcome for a in run.attempts] == ["suspended", "suspended", "completed"]
    [step] = run.steps
    assert (step["status"], step["attempts"]) == ("completed", 3)  # one step, three runs
