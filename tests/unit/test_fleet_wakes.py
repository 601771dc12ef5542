"""The fleet's tick and its wakes within the minute, on the in-memory broker: a due delayed
id counts in the backlog at the tick; one due before the invocation must end is waited for,
promoted, and gets its worker; nothing due soon returns at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from asyncz.errors import BrokerUnavailableError
from asyncz.fleet import wakes
from asyncz.fleet.wakes import tick, wait_for_wakes
from asyncz.port_types import Dispatch, epoch_ms
from asyncz.settings import Settings
from asyncz.testing import MemoryBroker
from tests.support import memory

pytestmark = pytest.mark.unit


class UnavailableFor(MemoryBroker):
    """Redis unavailable for the first ``looks`` looks at the delayed sets, then back."""

    def __init__(self, looks: int) -> None:
        super().__init__()
        self.unavailable = looks

    async def next_due(self, queues: Any) -> int | None:
        if self.unavailable > 0:
            self.unavailable -= 1
            raise BrokerUnavailableError("the queue (Redis) is unavailable")
        return await super().next_due(queues)


def settings(**kw: Any) -> Settings:
    return memory.settings(**{"fleet_max_workers": 4, "fleet_jobs_per_worker": 50, **kw})


async def delayed(
    broker: MemoryBroker, job_id: str, run_at_ms: int, queue: str = "default"
) -> None:
    await broker.enqueue([Dispatch(job_id, queue, 0, run_at_ms, False)])


def test_the_tick_promotes_a_due_delayed_id_so_it_gets_a_worker() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        await delayed(broker, "retry", epoch_ms() - 1)
        moved, plan = await tick(broker, settings())
        assert moved == 1 and "retry" in broker.ready["default"]
        assert (plan.backlog, plan.start) == (1, 1)
        assert await broker.starting_workers() == 1

    asyncio.run(go())


def test_the_tick_leaves_a_delayed_id_that_is_not_due() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        await delayed(broker, "later", epoch_ms() + 60_000)
        moved, plan = await tick(broker, settings())
        assert moved == 0 and (plan.backlog, plan.start) == (0, 0)
        assert broker.delayed["default"] == {"0|later": broker.delayed["default"]["0|later"]}

    asyncio.run(go())


def test_the_fleet_waits_for_a_wake_due_in_its_time_then_starts_a_worker() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        due = epoch_ms() + 300
        await delayed(broker, "sleeper", due)
        seen: list[tuple[int, bool]] = []  # at each invoke: the time, and the id ready?

        def invoke() -> None:
            seen.append((epoch_ms(), "sleeper" in broker.ready.get("default", {})))

        out = await wait_for_wakes(broker, settings(), time.monotonic() + 30, invoke)
        assert out == (1, 1)  # one wake, one worker
        [(at, ready)] = seen
        assert ready and at >= due  # promoted first, and not before it was due
        assert await broker.next_due(["default"]) is None

    asyncio.run(go())


def test_the_fleet_waits_for_each_wake_of_its_minute_in_turn() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        now = epoch_ms()
        await delayed(broker, "first", now + 100)
        await delayed(broker, "second", now + 400, queue="other")
        order: list[set[str]] = []

        def invoke() -> None:
            order.append({i for q in broker.ready.values() for i in q})
            broker.ready.clear()  # the worker took it, and left
            broker.starting.clear()

        out = await wait_for_wakes(broker, settings(), time.monotonic() + 30, invoke)
        assert out == (2, 2) and order == [{"first"}, {"second"}]

    asyncio.run(go())


def test_a_live_worker_takes_the_wake_without_a_new_one() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        await broker.register_worker("w1", 60)
        await delayed(broker, "sleeper", epoch_ms() + 100)
        invoked: list[int] = []
        out = await wait_for_wakes(
            broker, settings(), time.monotonic() + 30, lambda: invoked.append(1)
        )
        assert out == (1, 0) and invoked == [] and "sleeper" in broker.ready["default"]

    asyncio.run(go())


def test_nothing_due_within_its_time_returns_at_once_and_leaves_the_wake() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        await delayed(broker, "tomorrow", epoch_ms() + 86_400_000)
        invoked: list[int] = []
        out = await wait_for_wakes(
            broker, settings(), time.monotonic() + 30, lambda: invoked.append(1)
        )
        assert out == (0, 0) and invoked == []
        assert await broker.next_due(["default"]) is not None
        assert await wait_for_wakes(
            MemoryBroker(), settings(), time.monotonic() + 30, lambda: None
        ) == (0, 0)

    asyncio.run(go())


def test_a_paused_queues_wake_is_not_waited_for() -> None:
    async def go() -> None:
        broker = MemoryBroker()
        await delayed(broker, "held", epoch_ms() + 100)
        await broker.limits.mirror_paused({"default"})
        out = await wait_for_wakes(broker, settings(), time.monotonic() + 30, lambda: None)
        assert out == (0, 0) and "held" not in broker.ready.get("default", {})

    asyncio.run(go())


def test_a_wait_looks_again_after_redis_was_unavailable_and_starts_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wakes, "RECHECK_SECONDS", 0.01)

    async def go() -> None:
        broker = UnavailableFor(looks=3)
        await delayed(broker, "sleeper", epoch_ms() + 100)
        out = await wait_for_wakes(broker, settings(), time.monotonic() + 30, lambda: None)
        assert out == (1, 1) and broker.unavailable == 0

    asyncio.run(go())


def test_a_wait_whose_redis_is_still_unavailable_at_its_end_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wakes, "RECHECK_SECONDS", 0.01)

    async def go() -> None:
        broker = UnavailableFor(looks=10**6)
        await delayed(broker, "sleeper", epoch_ms() + 100)
        with pytest.raises(BrokerUnavailableError):
            await wait_for_wakes(broker, settings(), time.monotonic() + 0.2, lambda: None)
        assert broker.unavailable < 10**6 - 1  # it looked again before it gave up

    asyncio.run(go())
