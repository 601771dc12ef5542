"""The spawned jobs' part of the store contract (see tests/support/contract.py): run
against the in-memory store and against PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

from asyncz.jobs import JobStatus, UniqueScope
from tests.support.contract import Ports, insert, new, scenario

NO_JOB = "00000000-0000-0000-0000-000000000000"


async def _spawner(store: Any, **kw: Any) -> Any:
    job_id = await insert(store, submitted_by="team-a", submitted_by_key_id="key-a", **kw)
    [lease] = await store.claim([job_id], "w", 3600)
    return lease


def test_a_spawned_job_is_stored_once_while_its_spawner_holds_the_lease(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        lease = await _spawner(store)
        child = str(uuid.uuid4())
        stale = lease.__class__(**{**{f: getattr(lease, f) for f in lease.__slots__},
                                   "token": str(uuid.uuid4())})  # fmt: skip
        assert await store.spawns.insert(stale, child, new(), 5) is None  # not its lease
        first = await store.spawns.insert(lease, child, new(), 5)
        assert first["inserted"] and not first["too_deep"] and first["due"]
        again = await store.spawns.insert(lease, child, new(), 5)  # a retry after a crash
        assert not again["inserted"]
        found = await store.spawns.find(child, new())
        assert found["id"] == child and found["spawned_by"] == lease.job_id
        job = await store.get_job(child)
        assert (job.spawned_by, job.spawn_depth) == (lease.job_id, 1)
        assert (job.submitted_by, job.submitted_by_key_id) == ("team-a", "key-a")  # its key
        spawner = await store.get_job(lease.job_id)
        assert spawner.has_dependents and spawner.spawned_by is None
        assert await store.spawns.count(lease.job_id, 100) == {"queued": 1}
        [listed] = await store.spawns.list(lease.job_id, None, 10)
        assert listed.id == child

    scenario(ports, body)


def test_a_spawn_a_unique_key_points_elsewhere_finds_the_holder(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        held = new(unique_key="nightly", unique_scope=UniqueScope.QUEUED_OR_RUNNING)
        holder = str(uuid.uuid4())
        assert await store.unique.insert(holder, held) is not None
        lease = await _spawner(store)
        child = str(uuid.uuid4())
        row = await store.spawns.insert(lease, child, held, 5)
        assert not row["inserted"]
        found = await store.spawns.find(child, held)
        assert found["id"] == holder and found["spawned_by"] is None
        assert await store.get_job(child) is None

    scenario(ports, body)


def test_a_spawner_at_the_depth_bound_stores_nothing(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        lease = await _spawner(store)
        child = str(uuid.uuid4())
        assert (await store.spawns.insert(lease, child, new(), 5))["inserted"]
        [deep] = await store.claim([child], "w", 3600)
        row = await store.spawns.insert(deep, str(uuid.uuid4()), new(), 1)
        assert row["too_deep"] and not row["inserted"] and row["spawn_depth"] == 1

    scenario(ports, body)


def test_a_cancelled_spawners_cascade_page_cancels_only_its_live_jobs(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        lease = await _spawner(store)
        ids = [str(uuid.uuid4()) for _ in range(3)]
        for i in ids:
            assert (await store.spawns.insert(lease, i, new(), 5))["inserted"]
        [running] = await store.claim([ids[0]], "w2", 3600)
        assert await store.spawns.cascade([lease.job_id], 10) == []  # not cancelled: nothing
        await store.steps.suspend(lease, 3600, "gather")
        assert (await store.cancel(lease.job_id))["status"] == "cancelled"
        first = await store.spawns.cascade([lease.job_id], 1)  # a page of one
        assert [r["kind"] for r in first] == ["cancelled"]
        rest = await store.spawns.cascade([lease.job_id], 10)
        assert len(rest) == 2 and await store.spawns.cascade([lease.job_id], 10) == []
        jobs = {i: await store.get_job(i) for i in ids}
        assert jobs[running.job_id].status == "processing"  # flagged: it stops at its heartbeat
        assert jobs[running.job_id].cancel_requested
        assert sorted(str(j.status) for j in jobs.values()) == [
            "cancelled", "cancelled", "processing"]  # fmt: skip

    scenario(ports, body)


def test_a_gather_counts_each_end_once_and_completes_when_the_last_has_ended(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        lease = await _spawner(store)
        kids = [str(uuid.uuid4()) for _ in range(3)]
        for kid in kids:
            assert (await store.spawns.insert(lease, kid, new(), 5))["inserted"]
        [early] = await store.claim([kids[0]], "w", 3600)
        assert await store.complete_many([(early, "zero")])  # ended before the gather began
        terms = {"jobs": kids, "total": 3, "max_bytes": 1 << 20}
        step = {"seq": 1, "name": "all", "kind": "gather", "after_name": None,
                "job_attempt": 1, "result": json.dumps(terms), "wait_until": None,
                "wait_key": None}  # fmt: skip
        opened = await store.steps.open_wait(lease.job_id, lease.token, step)
        assert opened["status"] == "waiting"
        assert await store.spawns.progress(lease.job_id) == {"name": "all", "pending": 2,
                                                             "total": 3}  # fmt: skip
        assert await store.steps.suspend(lease, 3600, "gather 'all'")
        one, two = await store.claim(kids[1:], "w", 3600)
        assert await store.complete_many([(one, "one")])
        rows = await store.spawns.cascade([kids[1]], 10)
        assert [(r["kind"], r["id"]) for r in rows] == [("gatherer", lease.job_id)]
        assert await store.spawns.settle(lease.job_id, [kids[1]]) == []
        assert await store.spawns.settle(lease.job_id, [kids[1]]) == []  # counted once
        assert (await store.spawns.progress(lease.job_id))["pending"] == 1
        await store.finish_failed(two, status=JobStatus.DEAD, outcome="failed",
                                  error="ValueError: torn", delay_seconds=0)  # fmt: skip
        [woken] = await store.spawns.settle(lease.job_id, None)  # recovery's full count
        assert (woken["id"], woken["status"], woken["due"]) == (lease.job_id, "suspended", True)
        [stored] = await store.steps.load(lease.job_id, 0, 10)
        assert stored["status"] == "completed"
        assert [(e["status"], e["result"]) for e in stored["result"]] == [
            ("completed", "zero"), ("completed", "one"), ("dead", None)]  # fmt: skip
        assert stored["result"][2]["error"] == "ValueError: torn"
        assert await store.spawns.settle(lease.job_id, None) == []
        assert await store.spawns.waiting_gatherers(NO_JOB, 10) == []

    scenario(ports, body)
