"""Durable tasks' steps, run in-process against the in-memory store (asyncz.testing's
run_durable, the helper users test with): a step runs once per job, its result replays on
later attempts, a changed task ends dead as nondeterministic, and the limits hold."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from asyncz.durable.clock import SYSTEM_CLOCK
from asyncz.durable.journal import Journal, StepLimits
from asyncz.errors import InvalidPayloadError, StepLeaseLostError
from asyncz.jobs import NewJob
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import ManualClock, MemoryStore, run_durable

pytestmark = pytest.mark.unit


def _counted(calls: Counter[str], name: str, value: Any = None) -> Any:
    calls[name] += 1
    return value if value is not None else name


def test_a_failing_third_step_retries_the_job_and_the_first_two_run_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    def third() -> str:
        calls["third"] += 1
        if calls["third"] < 3:
            raise RuntimeError(f"third failed ({calls['third']})")
        return "ok"

    @task("chain", durable=True, registry=reg)
    def chain(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        a = ctx.step("first", _counted, calls, "first", 1)
        b = ctx.step("second", _counted, calls, "second", a + 1)
        return {"b": b, "c": ctx.step("third", third)}

    run = run_durable(chain, max_retries=3, registry=reg)
    assert run.status == "completed" and run.result == {"b": 2, "c": "ok"}
    assert calls == {"first": 1, "second": 1, "third": 3}
    assert [a.outcome for a in run.attempts] == ["failed", "failed", "completed"]
    assert run.attempts[0].error == "RuntimeError: third failed (1)"
    steps = {s["name"]: s for s in run.steps}
    assert [s["name"] for s in run.steps] == ["first", "second", "third"]
    assert (steps["first"]["attempts"], steps["first"]["job_attempt"]) == (1, 1)
    assert (steps["third"]["attempts"], steps["third"]["job_attempt"]) == (3, 3)
    assert all(s["status"] == "completed" for s in run.steps)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # each attempt's outcome line: the steps it ran, and the one it stopped at
    assert [(line["status"], line["steps"], line["step"]) for line in lines] == [
        ("retrying", 2, "third"), ("retrying", 0, "third"), ("completed", 1, "third")]  # fmt: skip


def test_a_step_renamed_between_attempts_ends_dead_naming_both_and_a_reset_replay_runs_it() -> None:
    reg, calls, names = TaskRegistry(), Counter[str](), ["fetch", "summarise"]

    @task("renamed", durable=True, registry=reg)
    def renamed(payload: dict[str, Any], ctx: TaskContext) -> str:
        text = ctx.step(names[0], _counted, calls, names[0], "text")
        summary = ctx.step(names[1], _counted, calls, names[1], "summary")
        if names[1] == "summarise":
            names[1] = "summarise-v2"  # a deploy renames the step before the retry
            raise RuntimeError("the first attempt fails after its steps")
        return f"{text}/{summary}"

    run = run_durable(renamed, max_retries=5, registry=reg)
    assert run.status == "dead"
    assert run.error is not None and run.error.startswith(
        "nondeterministic: the task asks for step 'summarise-v2' after step 'fetch', where "
        "its history has step 'summarise'"
    )
    assert len(run.attempts) == 2  # never retried, never looped
    assert calls == {"fetch": 1, "summarise": 1}  # the renamed step did not run
    run.replay(reset_steps=True)
    assert run.status == "completed" and run.result == "text/summary"
    assert [s["name"] for s in run.steps] == ["fetch", "summarise-v2"]
    assert calls == {"fetch": 2, "summarise": 1, "summarise-v2": 1}  # started over


def test_a_changed_kind_under_a_stored_name_is_nondeterministic() -> None:
    reg, tries = TaskRegistry(), Counter[str]()

    @task("kinds", durable=True, registry=reg)
    def kinds(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        if tries["n"] == 1:
            ctx.step("when", lambda: "x")
            raise RuntimeError("retry me")
        return ctx.now("when")

    run = run_durable(kinds, max_retries=3, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("nondeterministic: step 'when' ran as a step step")
    assert "now step" in run.error


@pytest.mark.parametrize(
    ("second_attempt", "says"),
    [
        (["a", "new", "b"], "asks for step 'new' after step 'a', where its history has step 'b'"),
        (["b", "a"], "step 'b' ran after step 'a'; the task now asks for it as its first step"),
    ],
)
def test_a_step_inserted_before_a_stored_one_or_a_reorder_is_nondeterministic(
    second_attempt: list[str], says: str
) -> None:
    reg, tries = TaskRegistry(), Counter[str]()

    @task("order", durable=True, registry=reg)
    def order(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        for name in ["a", "b"] if tries["n"] == 1 else second_attempt:
            ctx.step(name, lambda: 1)
        if tries["n"] == 1:
            raise RuntimeError("retry me")
        return "done"

    run = run_durable(order, max_retries=3, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("nondeterministic: ") and says in run.error, run.error
    assert len(run.attempts) == 2


def test_a_step_over_the_result_limit_ends_the_job_dead_and_stores_nothing() -> None:
    reg = TaskRegistry()

    @task("big", durable=True, registry=reg)
    def big(payload: dict[str, Any], ctx: TaskContext) -> Any:
        ctx.step("small", lambda: "ok")
        return ctx.step("huge", lambda: "x" * 5000)

    run = run_durable(big, max_retries=3, registry=reg, max_result_bytes=1000)
    assert run.status == "dead" and len(run.attempts) == 1
    assert run.error is not None and run.error.startswith("step_limit: step 'huge' returned 5002")
    assert "ASYNCZ_MAX_RESULT_BYTES" in run.error
    assert [s["name"] for s in run.steps] == ["small"]


def test_the_steps_cap_and_the_bytes_cap_of_a_job_end_it_dead() -> None:
    reg = TaskRegistry()

    @task("many", durable=True, registry=reg)
    def many(payload: dict[str, Any], ctx: TaskContext) -> Any:
        for i in range(payload["n"]):
            ctx.step(f"s:{i}", lambda: "y" * payload["size"])
        return "done"

    run = run_durable(many, {"n": 6, "size": 1}, max_retries=2, registry=reg, max_steps_per_job=5)
    assert run.status == "dead" and len(run.attempts) == 1
    assert run.error is not None and "ASYNCZ_MAX_STEPS_PER_JOB" in run.error
    assert len(run.steps) == 5
    run = run_durable(many, {"n": 5, "size": 40}, registry=reg, max_step_bytes_per_job=100)
    assert run.status == "dead" and run.error is not None
    assert "ASYNCZ_MAX_STEP_BYTES_PER_JOB" in run.error and len(run.steps) == 2
    assert run_durable(many, {"n": 5, "size": 1}, registry=reg, max_steps_per_job=5).status == (
        "completed"
    )


def test_a_name_used_twice_in_one_job_is_an_error_that_says_so() -> None:
    reg = TaskRegistry()

    @task("twice", durable=True, registry=reg)
    def twice(payload: dict[str, Any], ctx: TaskContext) -> Any:
        for _ in range(2):
            ctx.step("chapter", lambda: 1)

    run = run_durable(twice, max_retries=3, registry=reg)
    assert run.status == "dead" and len(run.attempts) == 1
    assert run.error is not None
    assert run.error.startswith("step_usage: step name 'chapter' is used twice in this job")


def test_step_retries_wait_on_the_clock_within_the_attempt_and_a_bad_backoff_is_refused() -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConnectionError("model busy")
        return "answer"

    @task("retried", durable=True, registry=reg)
    def retried(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("ask", flaky, retries=3, backoff=payload["backoff"])

    clock = ManualClock()
    run = run_durable(retried, {"backoff": 2.0}, registry=reg, clock=clock)
    assert run.status == "completed" and run.result == "answer"
    assert len(run.attempts) == 1 and run.steps[0]["attempts"] == 3
    assert len(clock.slept) == 2 and 0 <= clock.slept[0] <= 2.0 and 0 <= clock.slept[1] <= 4.0
    refused = run_durable(retried, {"backoff": 2 * 86_400.0}, max_retries=2, registry=reg)
    assert refused.status == "dead" and refused.error is not None
    assert refused.error.startswith("step_usage: step 'ask': backoff=172800.0 s")
    calls.clear()
    spent = run_durable(retried, {"backoff": 0.5}, registry=reg)  # 3 retries: enough again
    assert spent.status == "completed"


def test_a_step_that_runs_out_of_retries_fails_the_attempt_and_runs_again_next_try() -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    def down() -> str:
        calls["down"] += 1
        if calls["down"] <= 2:
            raise ConnectionError("down")
        return "up"

    @task("outage", durable=True, registry=reg)
    def outage(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("call", down, retries=1, backoff=0.1)

    run = run_durable(outage, max_retries=1, registry=reg)
    assert run.status == "completed" and calls["down"] == 3
    assert [a.outcome for a in run.attempts] == ["failed", "completed"]
    assert run.steps[0]["attempts"] == 3 and run.steps[0]["status"] == "completed"


def test_now_and_uuid_are_recorded_and_a_replay_gets_the_same_values() -> None:
    reg, seen, tries = TaskRegistry(), [], Counter[str]()
    clock = ManualClock()

    @task("stamps", durable=True, registry=reg)
    def stamps(payload: dict[str, Any], ctx: TaskContext) -> Any:
        seen.append((ctx.now(), ctx.uuid(), ctx.now("named")))
        tries["n"] += 1
        clock.advance(3600)
        if tries["n"] < 3:
            raise RuntimeError("again")
        return [str(v) for v in seen[-1]]

    run = run_durable(stamps, max_retries=3, registry=reg, clock=clock)
    assert run.status == "completed" and len(seen) == 3
    assert seen[0] == seen[1] == seen[2]
    assert [s["name"] for s in run.steps] == ["now:1", "uuid:1", "named"]
    assert [s["kind"] for s in run.steps] == ["now", "uuid", "now"]


def test_an_async_durable_task_awaits_its_steps_and_replays_them() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    async def fetch(url: str) -> str:
        calls[url] += 1
        await asyncio.sleep(0)
        return f"<{url}>"

    @task("async_chain", durable=True, registry=reg)
    async def async_chain(payload: dict[str, Any], ctx: TaskContext) -> Any:
        page = await ctx.step("fetch", fetch, "a")
        size = await ctx.step("size", len, page)  # a sync function runs on a thread
        when = await ctx.now()
        tries["n"] += 1
        if tries["n"] == 1:
            raise RuntimeError("retry")
        return [page, size, when.year]

    run = run_durable(async_chain, max_retries=1, registry=reg)
    assert run.status == "completed" and run.result == ["<a>", 3, 2026]
    assert calls == {"a": 1}
    assert [s["name"] for s in run.steps] == ["fetch", "size", "now:1"]


def test_gather_over_named_steps_replays_whatever_order_they_finished_in() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    finished: list[int] = []

    async def chapter(i: int) -> str:
        calls[f"read:{i}"] += 1
        while tries["n"] == 1 and i < 2 and i + 1 not in finished:
            await asyncio.sleep(0.001)  # the first attempt finishes them last to first
        finished.append(i)
        return f"c{i}"

    @task("book", durable=True, registry=reg)
    async def book(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1

        async def one(i: int) -> str:
            text = await ctx.step(f"read:{i}", chapter, i)
            return await ctx.step(f"sum:{i}", lambda: text.upper())

        parts = await asyncio.gather(*(one(i) for i in range(3)))
        if tries["n"] == 1:
            raise RuntimeError("after the gather")
        return await ctx.step("merge", "+".join, parts)

    run = run_durable(book, max_retries=1, registry=reg)
    assert run.status == "completed" and run.result == "C0+C1+C2", run.error
    assert calls == {"read:0": 1, "read:1": 1, "read:2": 1}
    assert finished == [2, 1, 0]  # they finished in reverse; the replay asked in order


def test_a_gather_whose_first_run_crashed_midway_replays_without_a_false_verdict() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    async def part(i: int) -> int:
        calls[f"part:{i}"] += 1
        if i == 0 and tries["n"] == 1:
            await asyncio.sleep(30)  # the attempt times out here: part:0 is never stored
        return i

    @task("parts", durable=True, registry=reg)
    async def parts(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        await ctx.step("start", lambda: "go")
        got = await asyncio.gather(*(ctx.step(f"part:{i}", part, i) for i in range(3)))
        return await ctx.step("total", sum, got)

    run = run_durable(parts, max_retries=1, timeout_seconds=1, registry=reg)
    # the replay asks for part:0 (new) before part:1 and part:2 (stored after the same
    # step): it waits for them instead of calling it a changed task
    assert run.status == "completed" and run.result == 3, run.error
    assert calls == {"part:0": 2, "part:1": 1, "part:2": 1}
    assert run.attempts[0].outcome == "timed_out"


def test_a_failed_step_in_a_gather_runs_again_and_its_siblings_do_not() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    async def part(i: int) -> int:
        calls[f"part:{i}"] += 1
        if i == 0 and tries["n"] == 1:
            raise RuntimeError("part 0 failed this time")
        return i

    @task("parts", durable=True, registry=reg)
    async def parts(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        got = await asyncio.gather(*(ctx.step(f"part:{i}", part, i) for i in range(3)),
                                   return_exceptions=True)  # fmt: skip
        if any(isinstance(g, BaseException) for g in got):
            raise RuntimeError("a part failed")
        return await ctx.step("total", sum, got)

    run = run_durable(parts, max_retries=1, registry=reg)
    assert run.status == "completed" and run.result == 3, run.error
    assert calls == {"part:0": 2, "part:1": 1, "part:2": 1}
    assert {s["name"]: s["attempts"] for s in run.steps}["part:0"] == 2


def test_a_task_that_catches_the_nondeterminism_still_ends_dead() -> None:
    reg, tries = TaskRegistry(), Counter[str]()

    @task("stubborn", durable=True, registry=reg)
    def stubborn(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        try:
            ctx.step("v1" if tries["n"] == 1 else "v2", lambda: 1)
        except Exception:  # noqa: BLE001 - the point: the verdict outlives this
            return "swallowed"
        raise RuntimeError("retry")

    run = run_durable(stubborn, max_retries=3, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("nondeterministic: the task asks for step 'v2'")


def test_a_thread_left_behind_by_a_step_past_its_bound_can_neither_store_nor_run_a_step() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()
    late = threading.Event()

    @task("slow", durable=True, registry=reg)
    def slow(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        if tries["n"] == 1:
            try:  # the step outlives its 1 s bound: the attempt ends, its thread runs on
                ctx.step("stuck", lambda: ctx.cancelled.wait(30))
                ctx.step("late", _counted, calls, "late")
            finally:
                late.set()
            return "never"
        return ctx.step("fresh", _counted, calls, "fresh")

    run = run_durable(slow, max_retries=1, timeout_seconds=1, registry=reg)
    assert run.status == "completed" and run.result == "fresh"
    assert late.wait(5)
    assert calls == {"fresh": 1}
    assert [s["name"] for s in run.steps] == ["fresh"]  # nor "stuck": its result came late
    assert run.attempts[0].outcome == "timed_out"
    assert "step 'stuck' exceeded its 1 s timeout" in (run.attempts[0].error or "")


def test_steps_do_not_nest_and_belong_to_durable_tasks_only() -> None:
    reg = TaskRegistry()

    @task("nested", durable=True, registry=reg)
    def nested(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("outer", lambda: ctx.step("inner", lambda: 1))

    @task("plain", registry=reg)
    def plain(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("x", lambda: 1)

    run = run_durable(nested, max_retries=2, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage: step 'inner' asked for inside another step")
    run = run_durable(plain, registry=reg)
    assert run.error == "step_usage: steps are for durable tasks: @task(name, durable=True)"
    with pytest.raises(ValueError, match="takes \\(payload, ctx\\)"):
        task("no_ctx", durable=True, registry=reg)(lambda payload: None)


def test_a_plain_job_makes_no_step_call_to_the_store() -> None:
    reg = TaskRegistry()
    task("plain_echo", registry=reg)(lambda payload: payload)
    run = run_durable("plain_echo", {"x": 1}, registry=reg)
    seen: list[str] = []
    steps = run.service.store.steps
    for name in ("save", "load", "list", "reset", "prune"):
        original = getattr(steps, name)

        def spy(*a: Any, _n: str = name, _f: Any = original, **k: Any) -> Any:
            seen.append(_n)
            return _f(*a, **k)

        setattr(steps, name, spy)

    async def again() -> None:
        from asyncz.jobs import NewJob
        from tests.support.workers import running_worker

        job = await run.service.submit(NewJob(task="plain_echo", payload={"x": 2}))
        async with running_worker(run.service):
            while not (await run.service.get(job.job_id)).status.terminal:
                await asyncio.sleep(0.01)

    asyncio.run(again())
    assert run.status == "completed" and seen == []


def test_a_step_whose_lease_was_taken_stores_nothing_and_its_attempt_stops() -> None:
    from asyncz.jobs import NewJob
    from tests.support import memory
    from tests.support.workers import running_worker

    svc, calls = memory.service(worker_poll_seconds=0.05), Counter[str]()

    def taken(job_id: str) -> str:
        calls["taken"] += 1
        svc.store.jobs[job_id]["lease_token"] = "another-workers-token"  # type: ignore[attr-defined]
        return "done, but too late"

    @task("stale", durable=True, registry=svc.registry)
    def stale(payload: dict[str, Any], ctx: TaskContext) -> Any:
        with contextlib.suppress(Exception):  # the attempt stops anyway
            ctx.step("a", taken, ctx.job_id)
        return ctx.step("b", _counted, calls, "b")

    async def go() -> Any:
        job = await svc.submit(NewJob(task="stale", payload={}))
        async with running_worker(svc) as worker:
            while worker.stats.lost_leases == 0:
                await asyncio.sleep(0.01)
        return job.job_id

    job_id = asyncio.run(go())
    row = svc.store.jobs[job_id]  # type: ignore[attr-defined]
    assert calls == {"taken": 1}  # b never ran
    assert svc.store.steps.rows.get(job_id, {}) == {}  # type: ignore[attr-defined]
    assert (row["status"], row["lease_token"]) == ("processing", "another-workers-token")
    assert svc.store.attempts[job_id][-1]["outcome"] is None  # type: ignore[attr-defined]


def test_retention_deletes_a_durable_jobs_steps_in_bounded_pages_before_the_job() -> None:
    from datetime import timedelta

    reg = TaskRegistry()

    @task("five", durable=True, registry=reg)
    def five(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return [ctx.step(f"s:{i}", lambda: 1) for i in range(5)]

    run = run_durable(five, registry=reg, retain_finished_seconds=1, cascade_page_size=2)
    store: Any = run.service.store
    store.jobs[run.job_id]["finished_at"] -= timedelta(seconds=5)
    pages: list[int] = []
    prune = store.steps.prune

    async def counted(kind: str, older_than: float, jobs: int, limit: int) -> int:
        pages.append(n := await prune(kind, older_than, jobs, limit))
        assert limit == 2
        return n

    store.steps.prune = counted
    assert asyncio.run(run.service.prune()) == 1
    assert pages == [2, 2, 1, 0] and run.job_id not in store.jobs and store.steps.rows == {}


class Order(BaseModel):
    items: list[str]


class Shipped(BaseModel):
    count: int
    labels: list[str]


def test_a_durable_task_keeps_typed_payloads_limits_dependencies_and_span_events() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from asyncz import tracing
    from asyncz.jobs import Dependency, NewJob
    from tests.support import memory
    from tests.support.workers import running_worker

    svc = memory.service(worker_poll_seconds=0.05)

    @task("ship", durable=True, concurrency=1, registry=svc.registry)
    def ship(payload: Order, ctx: TaskContext) -> Shipped:
        labels = [ctx.step(f"label:{i}", str.upper, item) for i, item in enumerate(payload.items)]
        return Shipped(count=len(labels), labels=labels)

    @task("notify", durable=True, registry=svc.registry)
    def notify(payload: dict[str, Any], ctx: TaskContext) -> Any:
        [parent] = ctx.each_parent()
        return ctx.step("count", lambda: parent.result["count"])

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider.get_tracer("asyncz"))

    async def go() -> tuple[Any, Any]:
        parent = await svc.submit(NewJob(task="ship", payload={"items": ["a", "b"]}))
        child = await svc.submit(
            NewJob(task="notify", payload={}, depends_on=(Dependency(parent.job_id),))
        )
        async with running_worker(svc, concurrency=2):
            while not (await svc.get(child.job_id)).status.terminal:
                await asyncio.sleep(0.01)
        return await svc.get(parent.job_id), await svc.get(child.job_id)

    try:
        parent, child = asyncio.run(go())
    finally:
        tracing.reset()
        provider.shutdown()
    assert (parent.status.value, parent.result) == ("completed", {"count": 2, "labels": ["A", "B"]})
    assert (child.status.value, child.result) == ("completed", 2)
    [span] = [s for s in exporter.get_finished_spans() if s.name == "ship"]
    assert [e.attributes["asyncz.step"] for e in span.events] == ["label:0", "label:1"]
    with pytest.raises(InvalidPayloadError):
        asyncio.run(svc.submit(NewJob(task="ship", payload={"items": 3})))


@pytest.mark.parametrize("committed", [False, True])
def test_a_step_write_lost_to_a_database_outage_fails_the_attempt_and_the_retry_mends_it(
    committed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncz.errors import StoreOutcomeUnknownError, StoreUnavailableError
    from asyncz.testing import durable
    from asyncz.testing.store import MemoryStore

    reg, calls = TaskRegistry(), Counter[str]()

    @task("outage_write", durable=True, registry=reg)
    def outage_write(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("charge", _counted, calls, "charge", "receipt")

    class Flaky(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            save, failed = self.steps.save, []

            async def once(job_id: str, token: str, row: Any) -> bool:
                if not failed:
                    failed.append(1)
                    if committed:  # stored, but the answer was lost
                        await save(job_id, token, row)
                        raise StoreOutcomeUnknownError("no answer")
                    raise StoreUnavailableError("down")
                return await save(job_id, token, row)

            self.steps.save = once  # type: ignore[method-assign]

    monkeypatch.setattr(durable, "MemoryStore", Flaky)
    run = run_durable(outage_write, max_retries=2, registry=reg)
    assert run.status == "completed" and run.result == "receipt"
    assert [a.outcome for a in run.attempts] == ["failed", "completed"]
    # not stored: the step runs again (at least once); stored: the retry replays it
    assert calls["charge"] == (1 if committed else 2)


def test_a_long_history_is_read_back_a_page_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncz.durable import journal

    monkeypatch.setattr(journal, "HISTORY_PAGE", 2)
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    @task("long", durable=True, registry=reg)
    def long(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        values = [ctx.step(f"s:{i}", _counted, calls, f"s:{i}", i) for i in range(7)]
        if tries["n"] == 1:
            raise RuntimeError("retry")
        return sum(values)

    run = run_durable(long, max_retries=1, registry=reg)
    assert run.status == "completed" and run.result == 21
    assert set(calls.values()) == {1}  # all seven replayed from four pages


def test_a_caught_step_failure_whose_step_succeeds_next_time_is_never_a_silent_new_path() -> None:
    reg, calls, tries = TaskRegistry(), Counter[str](), Counter[str]()

    def primary() -> str:
        calls["primary"] += 1
        if calls["primary"] == 1:
            raise ConnectionError("primary down")
        return "p"

    @task("fallback", durable=True, registry=reg)
    def fallback(payload: dict[str, Any], ctx: TaskContext) -> Any:
        tries["n"] += 1
        try:
            answer = ctx.step("primary", primary)
        except ConnectionError:
            answer = ctx.step("backup", lambda: "b")
        done = ctx.step("finish", lambda: answer)
        if tries["n"] == 1:
            raise RuntimeError("a later failure")
        return done

    run = run_durable(fallback, max_retries=2, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith(
        "nondeterministic: step 'finish' ran after step 'backup'; the task now asks for it "
        "after step 'primary'"
    )


def test_a_step_an_async_task_never_awaited_fails_it_and_an_async_step_in_a_sync_task_too() -> None:
    reg, calls = TaskRegistry(), Counter[str]()

    async def send() -> str:
        calls["send"] += 1
        return "sent"

    @task("forgot_await", durable=True, registry=reg)
    async def forgot_await(payload: dict[str, Any], ctx: TaskContext) -> Any:
        ctx.step("notify", send)  # no await: the step would silently never run
        return "done"

    @task("sync_awaits", durable=True, registry=reg)
    def sync_awaits(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.step("notify", send)

    with pytest.warns(RuntimeWarning, match="never awaited"):
        run = run_durable(forgot_await, max_retries=2, registry=reg)
        import gc

        gc.collect()
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage: step 'notify' was never awaited")
    run = run_durable(sync_awaits, max_retries=2, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage: step 'notify' returned an awaitable")
    assert calls == {}


def test_a_plain_replay_of_a_dead_job_keeps_its_steps_and_replays_them() -> None:
    reg, calls, broken = TaskRegistry(), Counter[str](), [True]

    @task("fixable", durable=True, registry=reg)
    def fixable(payload: dict[str, Any], ctx: TaskContext) -> Any:
        paid = ctx.step("pay", _counted, calls, "pay", "receipt")
        if broken[0]:
            raise RuntimeError("the shipping service is down")
        return ctx.step("ship", lambda: f"shipped {paid}")

    run = run_durable(fixable, max_retries=0, registry=reg)
    assert run.status == "dead" and run.error == "RuntimeError: the shipping service is down"
    broken[0] = False
    run.replay()
    assert run.status == "completed" and run.result == "shipped receipt"
    assert calls == {"pay": 1}  # paid once, across the replay


def test_a_thread_left_behind_after_its_loop_closed_stores_nothing_and_leaks_no_coroutine() -> None:
    store = MemoryStore()

    async def opened() -> Journal:
        await store.insert_job("00000000-0000-4000-8000-000000000001",
                               NewJob(task="t", payload={}, timeout_seconds=60))  # fmt: skip
        [lease] = await store.claim(["00000000-0000-4000-8000-000000000001"], "w", 3600)
        limits = StepLimits(10, 1 << 20, 1 << 20)
        return await Journal.open(store.steps, lease, limits, SYSTEM_CLOCK, threading.Event(),
                                  False)  # fmt: skip

    journal = asyncio.run(opened())  # the loop is closed once this returns
    row = {
        "seq": 1,
        "name": "late",
        "kind": "step",
        "after_name": None,
        "status": "completed",
        "result": "1",
        "result_bytes": 1,
        "error": None,
        "attempts": 1,
        "seconds": 0.0,
    }
    # pytest turns an unawaited coroutine's RuntimeWarning into an error (filterwarnings)
    with pytest.raises(StepLeaseLostError):
        journal.save_from_thread(row, 1)
    assert asyncio.run(store.steps.load("00000000-0000-4000-8000-000000000001", 0, 10)) == []
