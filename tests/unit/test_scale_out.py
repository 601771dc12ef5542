"""Scale-out without servers: how many workers a backlog starts, when the check may reach
Redis, and who runs it (the api after a submit, a busy worker), on the in-memory broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.errors import BrokerUnavailableError
from asyncz.fleet.scale_out import ScaleOut, start_one
from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskContext
from asyncz.testing import MemoryBroker
from asyncz.worker.loop import WorkerLoop
from tests.support import memory
from tests.support.memory import service

pytestmark = pytest.mark.unit


def settings(**kw: Any) -> Settings:
    values: dict[str, Any] = {
        "fleet_max_workers": 4,
        "fleet_jobs_per_worker": 50,
        "scale_out_seconds": 0.2,
        **kw,
    }
    return memory.settings(**values)


async def backlog_of(broker: MemoryBroker, n: int) -> None:
    from asyncz.port_types import Dispatch, epoch_ms

    await broker.enqueue([Dispatch(f"id-{i}", "default", 0, epoch_ms(), True) for i in range(n)])


def _nop_waker() -> Any:
    async def waker() -> None:
        return None

    return waker


def test_a_burst_starts_the_missing_workers_once_across_sandboxes() -> None:
    started: list[int] = []

    async def waker() -> None:
        started.append(1)

    async def go() -> list[int]:
        broker = MemoryBroker()
        a, b = ScaleOut(settings(), waker), ScaleOut(settings(), waker)
        await backlog_of(broker, 1000)
        counts = [await a(broker), await a(broker), await b(broker)]  # throttled; locked
        await asyncio.sleep(0.25)  # the next interval: the 4 count as starting
        counts.append(await b(broker))
        for i in range(4):  # they register
            await broker.register_worker(f"w{i}", 30)
            await broker.worker_started()
        await asyncio.sleep(0.25)
        counts.append(await a(broker))
        await broker.unregister_worker("w0")  # one went away (idle exit, a crash)
        await asyncio.sleep(0.25)
        counts.append(await a(broker))
        return counts

    assert asyncio.run(go()) == [4, 0, 0, 0, 0, 1]
    assert len(started) == 5


def test_a_small_backlog_needs_one_worker_and_max_caps_the_rest() -> None:
    async def go() -> tuple[int, int]:
        small, big = MemoryBroker(), MemoryBroker()
        await backlog_of(small, 3)
        await backlog_of(big, 10_000)
        nop = _nop_waker()
        return await ScaleOut(settings(), nop)(small), await ScaleOut(settings(), nop)(big)

    assert asyncio.run(go()) == (1, 4)


def test_with_scale_out_off_only_one_worker_is_woken_when_none_is_alive() -> None:
    async def go() -> list[int]:
        broker = MemoryBroker()
        await backlog_of(broker, 1000)
        off = settings(scale_out_seconds=0)
        first = ScaleOut(off, _nop_waker())
        counts = [await first(broker), await ScaleOut(off, _nop_waker())(broker)]
        await broker.register_worker("w", 30)
        await broker.worker_started()
        counts.append(await ScaleOut(off, _nop_waker())(broker))
        return counts

    assert asyncio.run(go()) == [1, 0, 0]


def test_a_broker_outage_starts_nothing_and_raises_nothing() -> None:
    class Down(MemoryBroker):
        async def try_lock(self, name: str, ttl_seconds: float) -> bool:
            raise BrokerUnavailableError("down")

    assert asyncio.run(ScaleOut(settings(), _nop_waker())(Down())) == 0


def test_between_looks_the_check_is_answered_from_the_sandboxs_memory() -> None:
    """The api runs the check after every submit: only the first call of an interval may
    reach Redis: the default's wake check must cost the submit nothing."""
    calls: list[str] = []

    class Counting(MemoryBroker):
        async def try_lock(self, name: str, ttl_seconds: float) -> bool:
            calls.append("try_lock")
            return await super().try_lock(name, ttl_seconds)

        async def live_workers(self) -> int:
            calls.append("live_workers")
            return await super().live_workers()

    async def go() -> list[int]:
        broker = Counting()
        await backlog_of(broker, 1000)
        check = ScaleOut(settings(scale_out_seconds=3600), _nop_waker())
        return [await check(broker) for _ in range(1000)]

    assert asyncio.run(go()) == [4] + [0] * 999
    assert calls == ["try_lock", "live_workers"]


def test_no_waker_no_redis_call() -> None:
    class Loud(MemoryBroker):
        async def try_lock(self, name: str, ttl_seconds: float) -> bool:
            raise AssertionError("called")

    assert asyncio.run(ScaleOut(settings(), None)(Loud())) == 0


def test_a_busy_worker_starts_the_workers_a_backlog_submitted_at_once_still_lacks() -> None:
    """The api decides only at submits: a burst sent in one go is seen once, early. A worker
    that keeps finding work asks again (once a second, by the same lock)."""
    svc = service(fleet_max_workers=4, fleet_jobs_per_worker=5, scale_out_seconds=0.2)
    started: list[int] = []

    def slow(payload: dict[str, Any], ctx: TaskContext) -> None:
        import time

        time.sleep(0.3)

    svc.registry.register("slow", slow)

    async def wake() -> None:
        started.append(1)

    async def go() -> None:
        for _ in range(40):  # backlog 40 at 5 per worker: 4 wanted, none started yet
            await svc.submit(NewJob(task="slow", payload={}))
        stop = asyncio.Event()
        worker = WorkerLoop(
            svc,
            remaining_seconds=lambda: 3600,
            stop=stop,
            concurrency=2,
            scale_out=ScaleOut(svc.settings, wake),
        )
        running = asyncio.create_task(worker.run())
        # until it asks, or the backlog is gone (40 jobs of 0.3 s, two at a time: seconds)
        while not started and (await svc.stats())["queues"]["default"]["counts"]["queued"] > 0:
            await asyncio.sleep(0.05)
        stop.set()
        await running

    asyncio.run(go())
    # this worker is live: it starts the other three (at most the maximum, never more)
    assert 1 <= len(started) <= 3, started


def test_workers_scale_out_only_when_the_deployment_does() -> None:
    from asyncz.fleet.invoke import lambda_scale_out as worker_scale_out

    on = Settings(scale_out_seconds=1, wake_worker=True)
    assert isinstance(worker_scale_out(on, "asyncz-worker"), ScaleOut)
    assert worker_scale_out(on.model_copy(update={"scale_out_seconds": 0}), "w") is None
    assert worker_scale_out(on.model_copy(update={"wake_worker": False}), "w") is None
    assert worker_scale_out(on, None) is None  # no worker function named: nothing to start


def test_a_worker_asked_for_at_once_starts_unless_one_is_starting_already() -> None:
    started: list[int] = []

    async def waker() -> None:
        started.append(1)

    async def go() -> list[int]:
        broker = MemoryBroker()  # no backlog, and the plan would start none: asked, it does
        first = await start_one(broker, waker)
        second = await start_one(broker, waker)  # the first still counts as starting
        return [first, second, await broker.starting_workers()]

    assert asyncio.run(go()) == [1, 0, 1]
    assert started == [1]


def test_a_worker_that_cannot_be_started_at_once_is_left_to_the_fleet() -> None:
    async def failing() -> None:
        raise RuntimeError("invoke refused")

    assert asyncio.run(start_one(MemoryBroker(), failing)) == 0


def test_the_lambda_client_is_kept_out_of_the_collectors_walks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sandbox's Lambda client (tens of thousands of objects, kept for the sandbox's life)
    is frozen once built: no later collection walks it, so none is set off by it."""
    import gc

    from asyncz.fleet import invoke

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(invoke, "_client", None)
    gc.unfreeze()
    try:
        client = invoke.lambda_client()
        assert gc.get_freeze_count() > 10_000
        assert not any(o is client for o in gc.get_objects())  # not in any generation
        assert invoke.lambda_client() is client  # built once
    finally:
        gc.unfreeze()
