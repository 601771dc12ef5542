"""ctx.gather on the in-memory store, the jobs it waits on run in-process by run_durable: it
suspends the task until every one has ended and returns their results in order; a job that
ended dead raises SpawnedJobFailedError naming it (or stands in its place); a job that ended
before the gather began counts as ended; its timeout raises GatherTimeoutError in the task;
its bytes are bounded; a suspended gatherer says how many of its jobs have ended."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.errors import GatherTimeoutError, SpawnedJobFailedError
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import run_durable

pytestmark = pytest.mark.unit


def _registry() -> TaskRegistry:
    reg = TaskRegistry()

    @task("render", registry=reg, max_retries=0)
    def render(payload: dict[str, Any]) -> str:
        if payload.get("fail"):
            raise ValueError(f"page {payload['page']} is torn")
        return f"page {payload['page']}"

    return reg


def test_a_gather_returns_its_jobs_results_in_order_once_they_have_all_ended() -> None:
    reg = _registry()
    runs: list[str] = []

    @task("book", durable=True, registry=reg)
    def book(payload: dict[str, Any], ctx: TaskContext) -> list[str]:
        runs.append("run")
        pages = [ctx.spawn("render", {"page": n}) for n in range(payload["pages"])]
        return list(ctx.gather(pages, timeout=3600))

    run = run_durable(book, {"pages": 20}, registry=reg)
    assert run.status == "completed", run.error
    assert run.result == [f"page {n}" for n in range(20)]
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]
    assert len(runs) == 2  # the wake replays the spawns: none is submitted again
    store: Any = run.service.store
    assert sum(1 for j in store.jobs.values() if j.get("spawned_by") == run.job_id) == 20
    gather = run.steps[-1]
    assert (gather["name"], gather["kind"], gather["status"]) == ("gather:1", "gather", "completed")


def test_a_dead_job_raises_spawned_job_failed_naming_it_unless_exceptions_are_returned() -> None:
    reg = _registry()

    @task("strict", durable=True, registry=reg)
    def strict(payload: dict[str, Any], ctx: TaskContext) -> Any:
        pages = [ctx.spawn("render", {"page": n, "fail": n == 1}) for n in range(3)]
        try:
            ends = ctx.gather(pages, timeout=60, return_exceptions=payload["lenient"])
            return [f"{e.code}: {e}" if isinstance(e, Exception) else e for e in ends]
        except SpawnedJobFailedError as exc:
            return {"failed": exc.job_id, "status": exc.status, "error": exc.error}

    for lenient in (False, True):
        run = run_durable(strict, {"lenient": lenient}, registry=reg)
        store: Any = run.service.store
        torn = next(j["id"] for j in store.jobs.values() if j["payload"].get("fail"))
        assert run.status == "completed", run.error
        if lenient:
            assert run.result[0] == "page 0" and run.result[2] == "page 2"
            assert run.result[1].startswith(f"spawned_job_failed: spawned job {torn} ended dead")
        else:
            assert run.result["failed"] == torn and run.result["status"] == "dead"
            assert "ValueError: page 1 is torn" in run.result["error"]


def test_jobs_that_ended_before_the_gather_began_count_as_ended() -> None:
    reg = _registry()

    @task("late_gather", durable=True, registry=reg)
    def late_gather(payload: dict[str, Any], ctx: TaskContext) -> list[str]:
        pages = [ctx.spawn("render", {"page": n}) for n in range(3)]
        ctx.sleep("meanwhile", seconds=5)  # its jobs run and end while it sleeps
        return list(ctx.gather(pages, timeout=60))

    run = run_durable(late_gather, registry=reg)
    assert run.status == "suspended"  # the sleep
    run.advance(5)
    assert run.status == "completed" and run.result == ["page 0", "page 1", "page 2"]
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]  # no second wait


def test_a_gather_whose_timeout_passes_raises_in_the_task() -> None:
    reg = _registry()

    @task("impatient", durable=True, registry=reg)
    def impatient(payload: dict[str, Any], ctx: TaskContext) -> str:
        later = ctx.spawn("render", {"page": 1}, delay_seconds=7200)  # not before the timeout
        try:
            ctx.gather([later], timeout=60, name="pages")
        except GatherTimeoutError as exc:
            return str(exc)
        return "all ended"

    run = run_durable(impatient, registry=reg)
    assert run.status == "suspended" and run.job is not None
    assert run.job.suspended_for is not None
    assert run.job.suspended_for.startswith("gather 'pages' of 1 spawned jobs until ")
    reason = asyncio.run(run.service.held_reason(run.job))
    assert reason is not None and reason.startswith("0/1 spawned jobs ended: gather 'pages'")
    run.advance(61)
    assert run.status == "completed"
    assert run.result == ("gather 'pages': its timeout of 60 s passed before every one of its 1 "
                          "spawned jobs had ended")  # fmt: skip


def test_a_gather_past_its_byte_bound_ends_the_job_as_step_limit() -> None:
    reg = _registry()

    @task("greedy", durable=True, registry=reg)
    def greedy(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.gather([ctx.spawn("render", {"page": n}) for n in range(5)], timeout=60)

    run = run_durable(greedy, registry=reg, max_gather_bytes=100)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_limit: gather 'gather:1': the results of its 5 jobs are ")
    assert "ASYNCZ_MAX_GATHER_BYTES (100)" in run.error


def test_an_async_task_awaits_its_spawns_and_its_gather() -> None:
    reg = _registry()

    @task("async_book", durable=True, registry=reg)
    async def async_book(payload: dict[str, Any], ctx: TaskContext) -> list[str]:
        pages = [await ctx.spawn("render", {"page": n}) for n in range(4)]
        return list(await ctx.gather(pages, timeout=60))

    run = run_durable(async_book, registry=reg)
    assert run.status == "completed", run.error
    assert run.result == [f"page {n}" for n in range(4)]
