"""Durable tasks' callbacks on the in-memory store (run_durable): a callback's token works
from the moment it is made, its answer resumes the job once (a used token is refused, a
forged one unknown), an error raises in the task, the timeout raises, and a replay gets the
same token and URL back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.durable.callbacks import (
    CallbackFailedError,
    CallbackTimeoutError,
    callback_token,
    token_hash,
)
from asyncz.errors import CallbackNotFoundError, CallbackUsedError, InvalidInputError
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import durable, run_durable
from asyncz.testing.durable import DurableRun

pytestmark = pytest.mark.unit

URL = "https://api.example.test/prod"


def _shipping(reg: TaskRegistry, vendor: list[str], *, is_async: bool = False) -> Any:
    """Makes a callback, hands its URL to the vendor in a step, waits for the answer."""
    if is_async:

        @task("ship", durable=True, registry=reg)
        async def aship(payload: dict[str, Any], ctx: TaskContext) -> Any:
            cb = await ctx.callback("shipped", timeout=3600)
            await ctx.step("ask vendor", vendor.append, cb.url)
            return {"shipped": await cb.wait(), "url": cb.url}

        return aship

    @task("ship", durable=True, registry=reg)
    def ship(payload: dict[str, Any], ctx: TaskContext) -> Any:
        cb = ctx.callback("shipped", timeout=3600)
        ctx.step("ask vendor", vendor.append, cb.url)
        return {"shipped": cb.wait(), "url": cb.url}

    return ship


def _post(run: DurableRun, token: str, outcome: dict[str, Any]) -> str:
    return asyncio.run(run.service.callbacks.post(token, outcome))


def _token(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.mark.parametrize("is_async", [False, True])
def test_a_posted_result_resumes_the_job_once_and_a_used_or_forged_token_is_refused(
    is_async: bool,
) -> None:
    reg, vendor = TaskRegistry(), []
    run = run_durable(_shipping(reg, vendor, is_async=is_async), registry=reg, public_url=URL)
    assert run.status == "suspended" and run.job is not None
    assert run.job.suspended_for is not None
    assert run.job.suspended_for.startswith("callback 'shipped' until ")
    [url] = vendor
    assert url.startswith(f"{URL}/callbacks/cb_")
    assert _post(run, _token(url), {"result": {"tracking": "T1"}}) == run.job_id
    with pytest.raises(CallbackUsedError):
        _post(run, _token(url), {"result": {"tracking": "T2"}})  # a vendor's retry
    with pytest.raises(CallbackNotFoundError):
        _post(run, "cb_" + "x" * 43, {"result": 1})
    run.advance(0)
    # the URL the replay derived is the one handed out: the same token, never stored
    assert run.status == "completed"
    assert run.result == {"shipped": {"tracking": "T1"}, "url": url}
    assert [s["kind"] for s in run.steps] == ["callback", "step"]
    assert [a.outcome for a in run.attempts] == ["suspended", "completed"]


def test_an_answer_posted_before_the_task_waits_is_taken_without_suspending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg, services = TaskRegistry(), []

    class Seen(durable.JobService):  # the run's service, for the vendor inside the step
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            services.append(self)

    monkeypatch.setattr(durable, "JobService", Seen)

    @task("quick_vendor", durable=True, registry=reg)
    async def quick(payload: dict[str, Any], ctx: TaskContext) -> Any:
        cb = await ctx.callback("done", timeout=60)
        post = services[0].callbacks.post  # the vendor answers at once, inside the step
        await ctx.step("ask vendor", post, cb.token, {"result": "at once"})
        return await cb.wait()

    run = run_durable(quick, registry=reg)
    assert (run.status, run.result) == ("completed", "at once")
    assert [a.outcome for a in run.attempts] == ["completed"]  # it never suspended


def test_a_posted_error_raises_in_the_task_and_the_timeout_raises_too() -> None:
    reg, seen = TaskRegistry(), []

    @task("approve", durable=True, registry=reg)
    def approve(payload: dict[str, Any], ctx: TaskContext) -> Any:
        first = ctx.callback("first", timeout=60)
        ctx.step("send", seen.append, first.token)
        try:
            first.wait()
        except CallbackFailedError as exc:  # the vendor's error, as the task sees it
            outcome = f"{type(exc).__name__}: {exc}"
        second = ctx.callback("second", timeout=30)
        try:
            second.wait()
        except CallbackTimeoutError as exc:
            return [outcome, str(exc)]
        return [outcome, "no timeout"]

    run = run_durable(approve, registry=reg)
    _post(run, seen[0], {"error": "out of stock"})
    run.advance(0)
    assert run.status == "suspended"  # now on the second callback
    run.advance(30)
    assert run.status == "completed"
    assert run.result == ["CallbackFailedError: callback 'first' failed: out of stock",
                          "callback 'second' timed out: nothing was posted to its URL"]  # fmt: skip


def test_an_uncaught_callback_error_ends_the_job_dead_at_once() -> None:
    reg, seen = TaskRegistry(), []

    @task("strict", durable=True, registry=reg)
    def strict(payload: dict[str, Any], ctx: TaskContext) -> Any:
        cb = ctx.callback("answer", timeout=60)
        ctx.step("send", seen.append, cb.token)
        return cb.wait()

    run = run_durable(strict, registry=reg, max_retries=5)
    _post(run, seen[0], {"error": "refused"})
    run.advance(0)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("callback_failed: callback 'answer' failed: refused")
    assert [a.outcome for a in run.attempts] == ["suspended", "failed"]  # no retry


def test_a_body_over_the_result_bound_is_refused_and_the_wait_still_waits() -> None:
    reg, vendor = TaskRegistry(), []
    run = run_durable(_shipping(reg, vendor), registry=reg, public_url=URL,
                      max_result_bytes=100)  # fmt: skip
    with pytest.raises(InvalidInputError, match="limit is 100"):
        _post(run, _token(vendor[0]), {"result": "x" * 200})
    assert _post(run, _token(vendor[0]), {"result": "ok"}) == run.job_id


def test_a_token_is_derived_per_job_generation_and_name_and_looked_up_by_its_hash() -> None:
    key = b"k" * 32
    token = callback_token(key, "job-1", 0, "a")
    assert token == callback_token(key, "job-1", 0, "a") and token.startswith("cb_")
    others = {callback_token(key, "job-2", 0, "a"), callback_token(key, "job-1", 1, "a"),
              callback_token(key, "job-1", 0, "b"), callback_token(b"j" * 32, "job-1", 0, "a")}
    assert token not in others and len(others) == 4
    assert len(token_hash(token)) == 64 and token not in token_hash(token)


def test_callbacks_need_no_key_and_are_bounded_by_one_rate_for_the_deployment() -> None:
    from asyncz.api.access import AccessGate
    from asyncz.api.replies import Reply
    from asyncz.testing import MemoryBroker

    broker = MemoryBroker()

    async def get_broker() -> Any:
        return broker

    gate = AccessGate(ring=None, broker=get_broker, callback_rate=(2, 60))  # type: ignore[arg-type]

    async def go() -> list[Any]:
        return [await gate("POST", f"/callbacks/cb_{n}", {}) for n in range(3)]

    first, second, third = asyncio.run(go())
    assert first is None and second is None  # no key asked for
    assert isinstance(third, Reply) and third.status == 429
    assert third.body["error"] == "rate_limited" and third.headers["retry-after"]
