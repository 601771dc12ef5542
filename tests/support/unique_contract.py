"""The unique-jobs part of the store and broker contract (see tests/support/contract.py):
run against the in-memory adapters and against PostgreSQL + Redis."""

from __future__ import annotations

import uuid
from typing import Any

from asyncz.jobs import JobStatus, UniqueScope
from asyncz.port_types import Dispatch, epoch_ms
from tests.support.contract import Ports, new, scenario


def unique(key: str, scope: UniqueScope, **kw: Any) -> Any:
    return new(unique_key=key, unique_scope=scope, **kw)


def test_a_held_unique_key_inserts_nothing_until_its_holder_leaves_the_scope(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        for scope in (UniqueScope.QUEUED, UniqueScope.QUEUED_OR_RUNNING):
            key = f"k-{scope}"
            first = str(uuid.uuid4())
            assert (await store.unique.insert(first, unique(key, scope)))["id"] == first
            assert await store.unique.insert(str(uuid.uuid4()), unique(key, scope)) is None
            assert (await store.unique.holders([key]))[key]["id"] == first
            [lease] = await store.claim([first], "w", 3600)
            running = await store.unique.holders([key])
            assert running == {} if scope is UniqueScope.QUEUED else running[key]["id"] == first
            assert await store.complete(lease, {})
            assert await store.unique.holders([key]) == {}
            second = str(uuid.uuid4())
            assert (await store.unique.insert(second, unique(key, scope)))["id"] == second
            assert (await store.get_job(second)).unique_key == key

    scenario(ports, body)


def test_a_period_key_is_held_after_its_job_ended(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        first = str(uuid.uuid4())
        await store.unique.insert(first, unique("p", UniqueScope.PERIOD, unique_for=3600))
        [lease] = await store.claim([first], "w", 3600)
        assert await store.complete(lease, {})
        again = unique("p", UniqueScope.PERIOD, unique_for=3600)
        assert await store.unique.insert(str(uuid.uuid4()), again) is None
        assert (await store.unique.holders(["p"]))["p"]["id"] == first
        job = await store.get_job(first)
        assert job.unique_scope == "period" and job.unique_until > job.created_at

    scenario(ports, body)


def test_debounce_changes_nothing_of_another_tasks_or_another_submitters_holder(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        scope = UniqueScope.QUEUED_OR_RUNNING
        first = str(uuid.uuid4())
        billing = {"submitted_by": "billing", "submitted_by_key_id": "key-1"}
        await store.unique.insert(first, unique("h", scope, delay_seconds=60, **billing))
        before = await store.get_job(first)
        others = [
            {"task": "sleep", **billing},
            {"task": "echo", "submitted_by": "search", "submitted_by_key_id": "key-2"},
            # the name of a revoked key, given to another key
            {"task": "echo", "submitted_by": "billing", "submitted_by_key_id": "key-3"},
        ]
        for other in others:
            again = unique("h", scope, debounce=True, payload={"evil": True}, **other)
            assert await store.unique.insert(str(uuid.uuid4()), again) is None
        after = await store.get_job(first)
        assert (after.payload, after.run_at) == (before.payload, before.run_at)
        holder = (await store.unique.holders(["h"]))["h"]
        assert (holder["submitted_by"], holder["submitted_by_key_id"]) == ("billing", "key-1")

    scenario(ports, body)


def test_debounce_moves_a_waiting_holder_but_not_a_started_one(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        scope = UniqueScope.QUEUED_OR_RUNNING
        first = str(uuid.uuid4())
        await store.unique.insert(first, unique("d", scope, delay_seconds=60))
        later = unique("d", scope, delay_seconds=600, debounce=True, payload={"v": 2})
        row = await store.unique.insert(str(uuid.uuid4()), later)
        assert row["id"] == first and row["status"] == "queued" and row["due"] is False
        assert row["run_at_ms"] > epoch_ms() + 500_000
        job = await store.get_job(first)
        assert job.payload == {"v": 2} and epoch_ms(job.run_at) == row["run_at_ms"]
        now = unique("d", scope, debounce=True, payload={"v": 3})
        assert (await store.unique.insert(str(uuid.uuid4()), now))["due"] is True
        [lease] = await store.claim([first], "w", 3600)
        assert await store.unique.insert(str(uuid.uuid4()), now) is None  # it runs: a duplicate
        assert (await store.get_job(first)).payload == {"v": 3}
        assert lease.payload == {"v": 3}

    scenario(ports, body)


def test_two_items_of_one_batch_with_one_key_store_the_first(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        items = [(str(uuid.uuid4()), unique("b", UniqueScope.QUEUED)),
                 (str(uuid.uuid4()), new()),
                 (str(uuid.uuid4()), unique("b", UniqueScope.QUEUED))]  # fmt: skip
        rows = await store.unique.insert_many(items)
        assert [r is not None for r in rows] == [True, True, False]
        assert (await store.unique.holders(["b", "none"]))["b"]["id"] == items[0][0]
        assert (await store.get_job(items[1][0])).status is JobStatus.QUEUED

    scenario(ports, body)


def test_reschedule_moves_an_id_between_ready_and_delayed(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id, soon = str(uuid.uuid4()), epoch_ms() + 600_000
        await broker.enqueue([Dispatch(job_id, "default", 0, epoch_ms(), True)])
        await broker.reschedule([Dispatch(job_id, "default", 0, soon, False)])
        assert await broker.pop(["default"], 10, 0.1) == []
        await broker.reschedule([Dispatch(job_id, "default", 0, soon + 1000, False)])
        assert await broker.backlog(["default"]) == {"default": (0, 1)}
        await broker.reschedule([Dispatch(job_id, "default", 0, epoch_ms(), True)])
        assert await broker.pop(["default"], 10, 0.1) == [job_id]
        assert await broker.backlog(["default"]) == {"default": (0, 0)}

    scenario(ports, body)
