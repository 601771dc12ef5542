"""The flow-control contract (limits in the broker, paused queues in the store): run against
the in-memory adapters and against PostgreSQL + Redis, beside :mod:`tests.support.contract`
(a module imports these tests and defines the ``ports`` fixture)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

from asyncz.port_types import Dispatch, Slot, epoch_ms
from asyncz.tasks.limits import Counted, Rate, TaskLimits
from tests.support.contract import Ports, insert, scenario


def slot(limits: TaskLimits, key: str | None = None, task: str = "llm") -> Slot:
    return Slot(str(uuid.uuid4()), uuid.uuid4().hex, task, key, "default", 0, limits)


def test_a_task_limit_grants_its_slots_then_holds_back_until_one_is_released(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])  # a new state: nothing to rebuild
        lim = TaskLimits(concurrency=2)
        a, b, c = slot(lim), slot(lim), slot(lim)
        assert await broker.limits.acquire([a, b, c], 60) == ["ok", "ok", "concurrency"]
        assert await broker.limits.held_reason(c) == "concurrency"
        assert await broker.limits.held_reason(a) is None
        assert await broker.pop(["default"], 10, 0.05) == []  # held, not ready
        assert await broker.limits.release([a]) == 1
        assert await broker.pop(["default"], 10, 0.5) == [c.job_id]
        assert await broker.limits.acquire([c], 60) == ["ok"]
        [usage] = await broker.limits.usage({"llm": lim}, 10)
        assert (usage["running"], usage["waiting"], usage["limits"]) == (
            2, 0, {"concurrency": 2})  # fmt: skip

    scenario(ports, body)


def test_a_held_job_goes_back_to_its_place_in_line_ahead_of_the_jobs_due_after_it(
    ports: Ports,
) -> None:
    # A key's held job must not queue again behind every id that fell due while it waited
    # (a large backlog of another key's ids kept one key's jobs waiting for seconds).
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])  # a new state: nothing to rebuild
        lim = TaskLimits(key_concurrency=1)
        running = slot(lim, "B")
        held = replace(slot(lim, "B"), due_ms=epoch_ms() - 5_000)  # due 5 s ago
        assert await broker.limits.acquire([running, held], 60) == ["ok", "key_concurrency"]
        later = [Dispatch(str(uuid.uuid4()), "default", 0, epoch_ms(), True) for _ in range(3)]
        await broker.enqueue(later)
        assert await broker.limits.release([running]) == 1
        order = await broker.pop(["default"], 10, 0.5)
        assert order[0] == held.job_id and sorted(order[1:]) == sorted(d.job_id for d in later)

    scenario(ports, body)


def test_a_key_limit_counts_per_key_and_a_job_without_a_key_is_not_counted(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])  # a new state: nothing to rebuild
        lim = TaskLimits(key_concurrency=1)
        got = await broker.limits.acquire(
            [slot(lim, "A"), slot(lim, "B"), slot(lim, "A"), slot(lim), slot(lim)], 60
        )
        assert got == ["ok", "ok", "key_concurrency", "ok", "ok"]
        [usage] = await broker.limits.usage({"llm": lim}, 10)
        assert usage["keys"] == [
            {"key": "A", "running": 1, "waiting": 1},
            {"key": "B", "running": 1, "waiting": 0},
        ]

    scenario(ports, body)


def test_a_rate_holds_starts_in_its_window_and_wakes_them_when_it_opens(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])  # a new state: nothing to rebuild
        lim = TaskLimits(rate=Rate(2, 1))
        first = [slot(lim) for _ in range(3)]
        assert await broker.limits.acquire(first, 60) == ["ok", "ok", "rate"]
        assert await broker.limits.held_reason(first[2]) == "rate"
        assert await broker.limits.wake_due() == 0
        await asyncio.sleep(1.5)  # the window (1 s and the 0.2 s guard) opens
        assert await broker.limits.wake_due() == 1
        assert await broker.pop(["default"], 10, 0.5) == [first[2].job_id]
        assert await broker.limits.acquire([first[2]], 60) == ["ok"]

    scenario(ports, body)


def test_an_expired_slot_is_free_and_its_held_jobs_wake_without_a_release(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])  # a new state: nothing to rebuild
        lim = TaskLimits(concurrency=1)
        a, b = slot(lim), slot(lim)
        assert await broker.limits.acquire([a, b], 0.3) == ["ok", "concurrency"]
        await broker.limits.refresh([a], 0.3)  # renewed once, then its worker dies
        await asyncio.sleep(0.5)
        assert await broker.limits.wake_due() >= 1
        assert await broker.pop(["default"], 10, 0.5) == [b.job_id]
        assert await broker.limits.acquire([b], 60) == ["ok"]

    scenario(ports, body)


def test_a_lost_limit_state_grants_nothing_until_it_is_rebuilt(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        lim = TaskLimits(concurrency=1, rate=Rate(3, 60))
        running, a = slot(lim), slot(lim)
        assert await broker.limits.needs_rebuild()
        assert await broker.limits.acquire([a], 60) == ["lost"]
        assert await broker.pop(["default"], 10, 0.05) == []  # not kept: recovery re-enqueues
        await broker.limits.restore(
            [Counted("slots", "llm", None, f"r:{running.job_id}", 60_000)]
            + [Counted("starts", "llm", None, f"r:{running.job_id}:{n}", 1000, 60_200)
               for n in (1, 2)]
        )  # fmt: skip
        assert not await broker.limits.needs_rebuild()
        assert await broker.limits.acquire([a], 60) == ["concurrency"]
        # the running attempt's own worker takes its slot over at its next heartbeat ...
        await broker.limits.refresh([running], 60)
        [usage] = await broker.limits.usage({"llm": lim}, 10)
        assert usage["running"] == 1
        # ... and gives it back when it ends: the third start of the window may go, not a fourth
        await broker.limits.release([running])
        b = slot(lim)
        assert await broker.limits.acquire([a, b], 60) == ["ok", "concurrency"]
        await broker.limits.release([a])
        assert await broker.limits.acquire([b], 60) == ["rate"]

    scenario(ports, body)


def test_the_store_tells_the_running_attempts_and_recent_starts_a_limit_counted(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        ids = [await insert(store, task="llm", concurrency_key=k) for k in ("A", None)]
        other = await insert(store, task="echo")
        leases = await store.claim([*ids, other], "w", 600)
        assert len(leases) == 3
        running = await store.limits.running_limited(["llm"], 60, 100)
        assert {(r["id"], r["concurrency_key"]) for r in running} == {(ids[0], "A"), (ids[1], None)}
        assert all(0 < r["left_ms"] <= 60_000 for r in running)
        starts = await store.limits.recent_starts({"llm": 60, "nothing": 60}, 100)
        assert {(r["job_id"], r["attempt"], r["task"]) for r in starts} == {
            (ids[0], 1, "llm"), (ids[1], 1, "llm")}  # fmt: skip
        assert all(0 <= r["age_ms"] < 60_000 for r in starts)
        assert len(await store.limits.recent_starts({"llm": 60}, 1)) == 1

    scenario(ports, body)


def test_a_heartbeat_puts_back_a_slot_the_broker_lost(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.limits.restore([])
        lim = TaskLimits(concurrency=1)
        a, b, c = slot(lim), slot(lim), slot(lim)
        assert await broker.limits.acquire([a], 0.2) == ["ok"]
        await asyncio.sleep(0.3)  # a's slot expired (as if lost) ...
        assert await broker.limits.acquire([b], 60) == ["ok"]
        await broker.limits.release([b])  # ... and is gone from the broker
        await broker.limits.refresh([a], 60)  # a's lease was just renewed in the database
        assert await broker.limits.acquire([c], 60) == ["concurrency"]

    scenario(ports, body)


def test_a_thread_that_outlived_its_attempt_keeps_its_slot_beside_its_jobs_rebuilt_one(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        lim = TaskLimits(concurrency=2)
        old = slot(lim)  # its attempt ended, its thread runs on; a retry of its job runs elsewhere
        await broker.limits.restore([Counted("slots", "llm", None, f"r:{old.job_id}", 60_000)])
        assert await broker.limits.acquire([old], 60) == ["ok"]
        await broker.limits.refresh([old], 60, rebuilt=False)  # the retry's slot stays
        assert await broker.limits.acquire([slot(lim)], 60) == ["concurrency"]
        await broker.limits.release([old], ran=False)  # the thread returned
        assert await broker.limits.acquire([slot(lim), slot(lim)], 60) == ["ok", "concurrency"]

    scenario(ports, body)


def test_paused_queues_live_in_the_store_and_are_mirrored_to_the_broker(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        assert await store.limits.pause_queue("q1", None) is True
        assert await store.limits.pause_queue("q1", None) is False
        assert set(await store.limits.paused_queues()) == {"q1"}
        await broker.limits.mirror_paused({"q1"})
        assert await broker.limits.paused() == {"q1"}
        assert await store.limits.resume_queue("q1") is True
        assert await store.limits.resume_queue("q1") is False
        assert await store.limits.paused_queues() == {}
        await broker.limits.mirror_paused(set())
        assert await broker.limits.paused() == set()
        # an id a limit never saw is enqueued as ever
        await broker.enqueue([Dispatch(str(uuid.uuid4()), "q1", 0, epoch_ms(), True)])

    scenario(ports, body)


def test_a_keys_backlog_interleaves_with_the_keys_that_come_after_it(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        def due(key: str | None) -> Dispatch:
            return Dispatch(str(uuid.uuid4()), "default", 0, epoch_ms(), True, key)

        a, b, plain = [due("A") for _ in range(50)], [due("B") for _ in range(3)], due(None)
        await broker.enqueue(a)
        await broker.enqueue(b)
        await broker.enqueue([plain])
        order = await broker.pop(["default"], 100, 0.5)
        assert len(order) == 54
        assert {d.job_id for d in b} | {plain.job_id} <= set(order[:12])  # not behind all of A
        assert [i for i in order if i in {d.job_id for d in a}] == [d.job_id for d in a]
        first = due("A")  # a repeated id keeps its place (ZADD NX)
        assert await broker.enqueue([first]) == 1 and await broker.enqueue([first]) == 0

    scenario(ports, body)


def test_a_job_of_a_paused_queue_is_not_claimed_even_by_a_worker_that_has_not_seen_the_pause(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store, queue="default")
        await store.limits.pause_queue("default", "ops")
        assert await store.claim([job_id], "w1", 600) == []
        assert [str(r["id"]) for r in await store.unclaimed([job_id])] == [job_id]  # queued
        await store.limits.resume_queue("default")
        assert [lease.job_id for lease in await store.claim([job_id], "w1", 600)] == [job_id]

    scenario(ports, body)
