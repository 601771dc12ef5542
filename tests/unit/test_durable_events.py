"""ctx.wait_for_event on the in-memory store (run_durable): an event sent during the wait,
or after the submit but before the wait began, resumes the job with its payload; a wait
whose timeout passes returns None and the job goes on; one event per wait, in order; a wait
that names its senders takes only their events; bad input ends the job as step_usage."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from asyncz.durable.events import wait_key
from asyncz.errors import InvalidInputError, InvalidPayloadError
from asyncz.jobs import NewJob
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import MemoryBroker, MemoryStore, run_durable

pytestmark = pytest.mark.unit


def _approval(reg: TaskRegistry, *, is_async: bool = False, **wait: Any) -> Any:
    options = {"key": "order:1", "timeout": 60, **wait}
    if is_async:

        @task("fulfil", durable=True, registry=reg)
        async def afulfil(payload: dict[str, Any], ctx: TaskContext) -> Any:
            if payload.get("nap"):
                await ctx.sleep("nap", seconds=payload["nap"])
            approval = await ctx.wait_for_event("approval", **options)
            return {"approval": approval, "after": await ctx.step("ship", lambda: "shipped")}

        return afulfil

    @task("fulfil", durable=True, registry=reg)
    def fulfil(payload: dict[str, Any], ctx: TaskContext) -> Any:
        if payload.get("nap"):
            ctx.sleep("nap", seconds=payload["nap"])
        approval = ctx.wait_for_event("approval", **options)
        return {"approval": approval, "after": ctx.step("ship", lambda: "shipped")}

    return fulfil


@pytest.mark.parametrize("is_async", [False, True])
def test_an_event_sent_during_the_wait_resumes_the_job_with_its_payload(is_async: bool) -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg, is_async=is_async), registry=reg)
    assert run.status == "suspended" and run.job is not None
    assert run.job.suspended_for is not None
    assert run.job.suspended_for.startswith("event 'approval' key 'order:1' until ")
    assert run.send_event("approval", "order:2", {"ok": False}) == 0  # another key
    assert run.status == "suspended"
    assert run.send_event("approval", "order:1", {"ok": True}) == 1
    assert run.status == "completed"
    assert run.result == {"approval": {"ok": True}, "after": "shipped"}
    assert [(s["name"], s["kind"], s["status"]) for s in run.steps] == [
        ("event:approval:1", "event", "completed"), ("ship", "step", "completed")]  # fmt: skip
    assert run.send_event("approval", "order:1", {"ok": "again"}) == 0  # nothing waits now


@pytest.mark.parametrize("is_async", [False, True])
def test_an_event_sent_after_the_submit_before_the_wait_began_is_not_lost(is_async: bool) -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg, is_async=is_async), {"nap": 10}, registry=reg)
    assert run.status == "suspended"  # asleep: nothing waits for the event yet
    assert run.send_event("approval", "order:1", {"ok": "early"}) == 0
    run.advance(10)  # the wait begins: it finds the stored event, and never suspends
    assert run.status == "completed"
    assert run.result == {"approval": {"ok": "early"}, "after": "shipped"}
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]


@pytest.mark.parametrize("is_async", [False, True])
def test_a_wait_whose_timeout_passes_returns_none_and_the_job_goes_on(is_async: bool) -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg, is_async=is_async, timeout=3), registry=reg)
    assert run.status == "suspended"
    run.advance(3)
    assert run.status == "completed" and run.result == {"approval": None, "after": "shipped"}
    assert run.send_event("approval", "order:1", "late") == 0  # the timeout won


def test_a_job_waiting_twice_on_one_name_and_key_takes_one_event_per_wait_in_order() -> None:
    reg = TaskRegistry()

    @task("twice", durable=True, registry=reg)
    def twice(payload: dict[str, Any], ctx: TaskContext) -> Any:
        ctx.sleep("nap", seconds=5)
        first = ctx.wait_for_event("approval", key="order:1", timeout=60)
        second = ctx.wait_for_event("approval", key="order:1", timeout=60)
        third = ctx.wait_for_event("approval", key="order:1", timeout=60)
        return [first, second, third]

    run = run_durable(twice, registry=reg)
    run.send_event("approval", "order:1", "a")  # before the waits began: both kept
    run.send_event("approval", "order:1", "b")
    run.advance(5)  # the first two find them by themselves, in order; the third waits
    assert run.status == "suspended"
    assert run.send_event("approval", "order:1", "c") == 1
    assert run.status == "completed" and run.result == ["a", "b", "c"]
    names = [s["name"] for s in run.steps if s["kind"] == "event"]
    assert names == ["event:approval:1", "event:approval:2", "event:approval:3"]


def test_a_wait_that_names_its_senders_takes_only_their_events() -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg, senders=["ops"]), registry=reg)
    assert run.send_event("approval", "order:1", "forged", sender="intruder") == 0
    assert run.send_event("approval", "order:1", "anonymous") == 0
    assert run.status == "suspended"
    assert run.send_event("approval", "order:1", "real", sender="ops") == 1
    assert run.status == "completed" and run.result["approval"] == "real"


@pytest.mark.parametrize(
    ("wait", "problem"),
    [
        ({"timeout": 0}, "every wait has a timeout"),
        ({"timeout": 400 * 86_400}, "every wait has a timeout"),
        ({"key": ""}, "key= is a string of 1 to 200"),
        ({"key": 7}, "key= is a string"),
        ({"senders": "ops"}, "senders= is a list of 1 to 20 API key names"),
        ({"senders": []}, "senders= is a list"),
    ],
)
def test_a_wait_asked_wrongly_ends_the_job_saying_why(wait: dict[str, Any], problem: str) -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg, **wait), registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage:") and problem in run.error


def test_an_event_with_a_bad_name_or_payload_is_refused() -> None:
    reg = TaskRegistry()
    run = run_durable(_approval(reg), registry=reg)
    with pytest.raises(InvalidInputError, match="name is a string of 1 to 100"):
        run.send_event("", "order:1")
    with pytest.raises(InvalidPayloadError, match="NUL"):
        run.send_event("approval", "order:1", "a\x00b")
    reg = TaskRegistry()
    tight = run_durable(_approval(reg), registry=reg, max_payload_bytes=10)
    with pytest.raises(InvalidPayloadError, match="ASYNCZ_MAX_PAYLOAD_BYTES"):
        tight.send_event("approval", "order:1", "x" * 20)
    assert tight.send_event("approval", "order:1", "fits") == 1


def test_a_delivery_whose_caller_died_between_pages_is_finished_by_recovery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("asyncz.service.events.RESOLVE_PAGE", 2)
    monkeypatch.setattr("asyncz.service.waits.RESOLVE_PAGE", 2)

    def crash(point: str) -> None:
        if point == "events.between_pages":
            raise SystemExit("the api died here")

    monkeypatch.setattr("asyncz.service.events.crash_point", crash)
    settings = Settings(database_url="postgresql://unused", redis_url="redis://unused")
    store = MemoryStore()
    svc = JobService(store, MemoryBroker(), TaskRegistry(), settings)
    route = wait_key("approval", "order:1")

    async def go() -> None:
        for _ in range(5):
            job_id = str(uuid.uuid4())
            await store.insert_job(job_id, NewJob(task="t", payload={}, timeout_seconds=30))
            [lease] = await store.claim([job_id], "w", 3600)
            row = {"seq": 1, "name": "e", "kind": "event", "after_name": None, "job_attempt": 1,
                   "result": None, "wait_until": None, "wait_key": route}  # fmt: skip
            await store.steps.open_wait(job_id, lease.token, row)
            await store.steps.suspend(lease, 3600.0, "event")
        with pytest.raises(SystemExit):
            await svc.events.send("approval", "order:1", "all")
        assert _statuses(store) == ["completed"] * 2 + ["waiting"] * 3  # the first page
        await svc.recover()  # not yet: the delivery may still be under way
        assert _statuses(store).count("waiting") == 3
        monkeypatch.setattr("asyncz.service.events.PENDING_SECONDS", -1.0)
        report = await svc.recover()
        assert not report.failed and _statuses(store) == ["completed"] * 5
        assert [e["pending"] for e in store.events.rows] == [False]

    asyncio.run(go())


def _statuses(store: MemoryStore) -> list[str]:
    return sorted(steps[1]["status"] for steps in store.steps.rows.values())
