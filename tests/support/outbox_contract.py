"""The outbox's part of the store contract (see tests/support/contract.py): each end of a job
and each replay leaves one unpublished event, nothing else does; a page is published oldest
first and then forgotten, or kept when its publishing fails; a completed event carries the
result only when asked and within the bound; the gauges and retention. Run against the
in-memory store and against PostgreSQL. And the broker's lock, released early."""

from __future__ import annotations

from typing import Any

import pytest

from asyncz.jobs import AttemptOutcome, JobStatus
from asyncz.port_types import Row
from tests.support.contract import Ports, insert, scenario


async def _drain(store: Any, result_bytes: int = 0) -> list[Row]:
    taken: list[Row] = []

    async def publish(rows: list[Row]) -> None:
        taken.extend(rows)

    while await store.outbox.publish_page(10, result_bytes, publish):
        pass
    return taken


def test_each_end_and_each_replay_leaves_one_event_and_nothing_else_does(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        done, dead, queued = await insert(store), await insert(store), await insert(store)
        leases = {lease.job_id: lease for lease in await store.claim([done, dead], "w", 3600)}
        await store.heartbeat(list(leases.values()))
        assert not await store.outbox.any_pending()  # submits, claims, heartbeats: no end
        assert await store.complete(leases[done], {"ok": 1})
        await store.finish_failed(leases[dead], status=JobStatus.DEAD,
                                  outcome=AttemptOutcome.FAILED, error="boom")  # fmt: skip
        await store.cancel(queued)
        await store.replay(dead)
        await store.cancel(queued)  # an ended job's cancel changes nothing: no event
        events = await _drain(store)
        assert [(e["job_id"], e["type"], e["status"]) for e in events] == [
            (done, "asyncz.job.completed", "completed"), (dead, "asyncz.job.dead", "dead"),
            (queued, "asyncz.job.cancelled", "cancelled"),
            (dead, "asyncz.job.replayed", "queued")]  # fmt: skip
        first = events[0]
        assert (first["task"], first["queue"], first["attempts"]) == ("echo", "default", 1)
        assert first["finished_at"] is not None and first["submitted_at"] is not None
        assert first["result"] is None  # not asked for
        assert len({e["id"] for e in events}) == 4
        assert not await store.outbox.any_pending() and await _drain(store) == []

    scenario(ports, body)


@pytest.mark.parametrize(("bound", "carried"), [(100, {"ok": 1}), (5, None)])
def test_a_completed_event_carries_the_result_only_within_the_bound(
    ports: Ports, bound: int, carried: Any
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        await store.complete(lease, {"ok": 1})
        [event] = await _drain(store, result_bytes=bound)
        assert event["result"] == carried

    scenario(ports, body)


def test_a_page_whose_publishing_fails_stays_for_the_next_run(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        await store.cancel(job_id)

        async def refuse(rows: list[Row]) -> None:
            raise RuntimeError("the bus is down")

        with pytest.raises(RuntimeError):
            await store.outbox.publish_page(10, 0, refuse)
        gauges = await store.outbox.gauges()
        assert gauges["backlog"] == 1 and gauges["oldest_age"] >= 0
        [event] = await _drain(store)
        assert event["job_id"] == job_id
        assert await store.outbox.gauges() == {"backlog": 0, "oldest_age": 0.0}

    scenario(ports, body)


def test_retention_forgets_only_events_older_than_it_a_page_at_a_time(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        for _ in range(3):
            await store.cancel(await insert(store))
        assert await store.outbox.prune(3600, 10) == 0  # none is an hour old
        assert await store.outbox.prune(0, 2) == 2
        assert await store.outbox.prune(0, 2) == 1
        assert not await store.outbox.any_pending()

    scenario(ports, body)


def test_a_lock_released_early_can_be_taken_again(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        assert await broker.try_lock("outbox-pump", 60)
        assert not await broker.try_lock("outbox-pump", 60)
        await broker.unlock("outbox-pump")
        assert await broker.try_lock("outbox-pump", 60)
        await broker.unlock("outbox-pump")

    scenario(ports, body)
