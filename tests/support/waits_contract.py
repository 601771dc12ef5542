"""The waits' part of the store contract (see tests/support/contract.py): a durable task's
wait is stored through the lease fence, resolved once (the first commit wins, its timeout
included), wakes its job whether the attempt has suspended yet or not, and is found by its
routing key a page at a time. Run against the in-memory store and against PostgreSQL."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.jobs import JobStatus
from tests.support.contract import Ports, insert, scenario

DEADLINE = datetime(2030, 1, 1, tzinfo=UTC)


def wait(seq: int, name: str, key: str | None = "k", terms: Any = None) -> dict[str, Any]:
    return {"seq": seq, "name": name, "kind": "test", "after_name": None, "job_attempt": 1,
            "result": None if terms is None else json.dumps(terms), "wait_until": DEADLINE,
            "wait_key": key}  # fmt: skip


async def waiting_job(store: Any, *waits: dict[str, Any]) -> tuple[str, Any]:
    job_id = await insert(store)
    [lease] = await store.claim([job_id], "w", 3600)
    for w in waits or (wait(1, "w1"),):
        found = await store.steps.open_wait(job_id, lease.token, w)
        assert found is not None and found["status"] == "waiting"
    return job_id, lease


def test_a_wait_is_stored_through_the_fence_and_a_resolve_before_the_suspension_wakes_at_once(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        stale = replace(lease, token=str(uuid.uuid4()))
        assert await store.steps.open_wait(job_id, stale.token, wait(1, "w1")) is None
        assert await store.steps.open_wait(job_id, lease.token, wait(1, "w1")) == {
            "status": "waiting", "result": None}  # fmt: skip
        [row] = await store.steps.load(job_id, 0, 10)
        assert (row["status"], row["kind"], row["wait_until"]) == ("waiting", "test", DEADLINE)
        # the attempt still runs: the resolve marks it, and its suspension wakes it at once
        woke = await store.steps.resolve(job_id, 1, json.dumps({"v": 1}), 8)
        assert woke is not None and woke["status"] == "processing"
        assert await store.steps.resolve(job_id, 1, json.dumps({"v": 2}), 8) is None  # taken
        suspended = await store.steps.suspend(lease, 3600.0, "test 'w1' until later")
        assert suspended is not None and suspended["status"] == "suspended" and suspended["due"]
        [woken] = await store.claim([job_id], "w2", 3600)  # due now, not in an hour
        [row] = await store.steps.load(job_id, 0, 10)
        assert (row["status"], row["result"]) == ("completed", {"v": 1})
        # the flag was cleared: the next suspension waits for its time
        again = await store.steps.suspend(woken, 3600.0, "sleep")
        assert again is not None and not again["due"]

    scenario(ports, body)


def test_a_resolve_after_the_suspension_makes_the_job_due_now(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id, lease = await waiting_job(store)
        row = await store.steps.suspend(lease, 3600.0, "test 'w1'")
        assert row is not None and not row["due"]
        assert await store.claim([job_id], "w", 3600) == []
        woke = await store.steps.resolve(job_id, 1, "true", 4)
        assert woke is not None and (str(woke["id"]), woke["status"]) == (job_id, "suspended")
        assert woke["due"] and woke["run_at"] <= datetime.now(UTC) + timedelta(seconds=1)
        # its enqueue lost: recovery's scan finds the row due
        found = await store.maintenance.scan_due_suspended(None, 10)
        assert [str(r["id"]) for r in found] == [job_id]
        assert [w.job_id for w in await store.claim([job_id], "w", 3600)] == [job_id]

    scenario(ports, body)


def test_the_timeout_and_a_value_race_and_exactly_one_wins(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id, lease = await waiting_job(store, wait(1, "a"), wait(2, "b"))
        stale = replace(lease, token=str(uuid.uuid4()))
        assert await store.steps.time_out(stale, 1, "null") is None  # the lease fence
        assert await store.steps.time_out(lease, 1, "null") == {"timed_out": True, "result": None}
        assert await store.steps.resolve(job_id, 1, '"late"', 6) is None  # the timeout won
        assert await store.steps.resolve(job_id, 2, '"first"', 7) is not None
        assert await store.steps.time_out(lease, 2, "null") == {
            "timed_out": False, "result": "first"}  # fmt: skip
        rows = await store.steps.load(job_id, 0, 10)
        assert [(r["status"], r["result"]) for r in rows] == [
            ("completed", None), ("completed", "first")]  # fmt: skip

    scenario(ports, body)


def test_a_keyed_resolve_takes_each_jobs_earliest_wait_a_page_at_a_time(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        twice, _ = await waiting_job(store, wait(1, "first"), wait(2, "second"))
        other_key, _ = await waiting_job(store, wait(1, "x", key="other"))
        guarded, _ = await waiting_job(store, wait(1, "g", terms={"from": ["ops"]}))
        plain = [(await waiting_job(store))[0] for _ in range(3)]
        expected = sorted([twice, guarded, *plain], key=uuid.UUID)
        first = await store.steps.resolve_keyed("test", "k", '"v1"', 4, "dev", None, 2)
        assert [str(r["id"]) for r in first] == expected[:2]
        rest = await store.steps.resolve_keyed("test", "k", '"v1"', 4, "dev",
                                               str(first[-1]["id"]), 10)  # fmt: skip
        assert [str(r["id"]) for r in rest] == expected[2:]
        took = {str(r["id"]): r["resolved"] for r in first + rest}
        assert took == {**{j: True for j in expected}, guarded: False}  # not from "dev"
        steps = await store.steps.load(twice, 0, 10)
        assert [s["status"] for s in steps] == ["completed", "waiting"]  # one value per wait
        again = await store.steps.resolve_keyed("test", "k", '"v2"', 4, "ops", None, 10)
        assert {str(r["id"]): r["resolved"] for r in again} == {twice: True, guarded: True}
        assert [s["result"] for s in await store.steps.load(twice, 0, 10)] == ["v1", "v2"]
        [waiting] = await store.steps.load(other_key, 0, 10)
        assert waiting["status"] == "waiting"

    scenario(ports, body)


def test_the_wait_of_a_job_that_ended_is_not_resolved(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id, lease = await waiting_job(store)
        await store.steps.suspend(lease, 3600.0, "test 'w1'")
        await store.cancel(job_id)
        assert await store.steps.resolve(job_id, 1, "1", 1) is None
        rows = await store.steps.resolve_keyed("test", "k", "1", 1, None, None, 10)
        assert [(str(r["id"]), r["resolved"]) for r in rows] == [(job_id, False)]
        [row] = await store.steps.load(job_id, 0, 10)
        assert row["status"] == "waiting"
        assert (await store.get_job(job_id)).status is JobStatus.CANCELLED

    scenario(ports, body)
