"""An idle worker and the next wake of its queues, on the in-memory adapters: its poll ends
just before the wake, the last stretch is slept and promoted in the worker, and an idle
worker stays for a wake due within its idle window but not for one further off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.port_types import Dispatch, epoch_ms
from asyncz.testing import MemoryBroker
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.wakes import SHORTEST_WAIT, NextWake
from tests.support.memory import service

pytestmark = pytest.mark.unit


def next_wake(broker: MemoryBroker, events: list[str]) -> NextWake:
    async def promote() -> int:
        moved = await broker.promote_due(["default"])
        events.append(f"promoted {moved}")
        return moved

    return NextWake(broker, ["default"], promote)


def test_with_nothing_delayed_the_poll_is_the_whole_wait() -> None:
    async def go() -> None:
        events: list[str] = []
        assert await next_wake(MemoryBroker(), events).poll_until(5.0) == 5.0
        assert events == []

    asyncio.run(go())


def test_the_poll_ends_before_a_wake_and_the_last_stretch_is_promoted_here() -> None:
    async def go() -> None:
        broker, events = MemoryBroker(), []
        await broker.enqueue([Dispatch("sleeper", "default", 0, epoch_ms() + 60_000, False)])
        wake = next_wake(broker, events)
        assert await wake.poll_until(5.0) == 5.0  # a minute off: the whole poll
        far = await wake.poll_until(300.0)
        assert far < 60.0 and events == []  # ends before the wake, promotes nothing yet
        await broker.reschedule([Dispatch("sleeper", "default", 0, epoch_ms() + 20, False)])
        assert await wake.poll_until(5.0) == SHORTEST_WAIT  # within the timer's slack
        assert events == ["promoted 1"] and await broker.pop(["default"], 1, 0) == ["sleeper"]
        assert not wake.take_due()  # promoted already: not again at the top of the loop

    asyncio.run(go())


def test_a_busy_workers_poll_ends_before_each_wake_it_set_itself_without_a_look() -> None:
    async def go() -> None:
        broker, events = MemoryBroker(), []
        await broker.enqueue([Dispatch("other", "default", 0, epoch_ms() + 10_000, False)])
        wake = next_wake(broker, events)
        assert await wake.poll_until(5.0, look=False) == 5.0  # none known: the whole poll
        wake.expect(30.0)  # a job this worker suspended for 30 s
        wake.expect(120.0)  # a later one does not move it
        assert 29.0 < await wake.poll_until(300.0, look=False) < 30.0  # ends before it
        wake.expect(0.0)  # due now (a continuation): promoted here, the shortest poll
        assert await wake.poll_until(5.0, look=False) == SHORTEST_WAIT
        assert events == ["promoted 0"]  # no look: the other worker's id 10 s off unseen
        assert 29.0 < await wake.poll_until(300.0, look=False) < 30.0  # the next is known
        assert not wake.take_due()

    asyncio.run(go())


def run_worker(delay: float, idle_exit: float) -> tuple[dict[str, Any], str]:
    svc = service(worker_poll_seconds=0.5)

    async def go() -> tuple[dict[str, Any], str]:
        job = await svc.submit(NewJob(task="echo", payload={}, delay_seconds=delay))
        out = await WorkerLoop(
            svc, remaining_seconds=lambda: 3600, idle_exit_seconds=idle_exit
        ).run()
        got = await svc.get(job.job_id)
        return out, got.status.value

    return asyncio.run(go())


def test_an_idle_worker_stays_for_a_wake_within_its_idle_window() -> None:
    out, status = run_worker(delay=0.8, idle_exit=0.5)
    assert (out["completed"], out["stopped_because"], status) == (1, "idle", "completed")


def test_an_idle_worker_leaves_when_the_next_wake_is_further_than_its_idle_window() -> None:
    out, status = run_worker(delay=60, idle_exit=0.3)
    assert (out["claimed"], out["stopped_because"], status) == (0, "idle", "queued")
