"""The durable steps' part of the store contract (see tests/support/contract.py): run
against the in-memory store and against PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from asyncz.jobs import JobStatus
from tests.support.contract import Ports, insert, scenario


def step(seq: int, name: str, result: Any = None, **kw: Any) -> dict[str, Any]:
    row = {"seq": seq, "name": name, "kind": "step", "after_name": None, "status": "completed",
           "result": json.dumps(result), "result_bytes": len(json.dumps(result)), "error": None,
           "attempts": 1, "job_attempt": 1, "seconds": 0.25}  # fmt: skip
    return row | kw


def test_a_step_is_stored_only_while_its_attempt_holds_the_lease(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        assert not await store.steps.save(job_id, "0" * 32, step(1, "early"))  # not claimed
        [lease] = await store.claim([job_id], "w", 3600)
        assert await store.steps.save(job_id, lease.token, step(1, "a", {"x": 1}))
        stale = lease.token
        await store.finish_failed(lease, status=JobStatus.QUEUED, outcome="failed",
                                  error="boom", delay_seconds=0)  # fmt: skip
        assert not await store.steps.save(job_id, stale, step(2, "late"))  # lease gone
        [again] = await store.claim([job_id], "w2", 3600)
        assert not await store.steps.save(job_id, stale, step(2, "stale"))  # another's lease
        assert await store.steps.save(job_id, again.token, step(2, "b", [1, 2], after_name="a"))
        rows = await store.steps.load(job_id, 0, 10)
        assert [(r["seq"], r["name"], r["after_name"], r["result"]) for r in rows] == [
            (1, "a", None, {"x": 1}), (2, "b", "a", [1, 2])]  # fmt: skip

    scenario(ports, body)


def test_a_failed_step_is_overwritten_by_its_next_run_and_a_completed_one_never(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        failed = step(1, "call", status="failed", error="ConnectionError: down", attempts=2)
        failed |= {"result": None, "result_bytes": 0}
        assert await store.steps.save(job_id, lease.token, failed)
        assert await store.steps.save(job_id, lease.token, step(1, "call", "up", job_attempt=2))
        assert not await store.steps.save(job_id, lease.token, step(1, "call", "again"))
        assert not await store.steps.save(job_id, lease.token, step(1, "other", "x"))
        [row] = await store.steps.load(job_id, 0, 10)
        assert (row["status"], row["result"], row["attempts"]) == ("completed", "up", 3)
        [listed] = await store.steps.list(job_id, 0, 10)
        assert listed["job_attempt"] == 2 and listed["error"] is None
        assert listed["result_bytes"] == 4 and "result" not in listed
        assert 200 <= listed["duration_ms"] <= 1000  # now() less the run's 0.25 s
        assert listed["started_at"] < listed["finished_at"]

    scenario(ports, body)


def test_steps_are_read_in_pages_by_position(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        for seq in range(1, 8):
            assert await store.steps.save(job_id, lease.token, step(seq, f"s:{seq}", seq))
        first = await store.steps.load(job_id, 0, 3)
        rest = await store.steps.load(job_id, first[-1]["seq"], 10)
        assert [r["seq"] for r in first + rest] == list(range(1, 8))
        assert [r["name"] for r in await store.steps.list(job_id, 5, 10)] == ["s:6", "s:7"]
        assert await store.steps.list(await insert(store), 0, 10) == []

    scenario(ports, body)


def test_only_a_dead_jobs_steps_can_be_reset(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store, max_retries=0)
        [lease] = await store.claim([job_id], "w", 3600)
        assert await store.steps.save(job_id, lease.token, step(1, "a"))
        assert await store.steps.reset(job_id) == 0  # running: kept
        await store.finish_failed(lease, status=JobStatus.DEAD, outcome="failed", error="x")
        assert await store.steps.reset(job_id) == 1
        assert await store.steps.load(job_id, 0, 10) == []

    scenario(ports, body)


def test_retention_deletes_steps_of_the_jobs_it_prunes_a_bounded_page_at_a_time(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        done, dead, young = await insert(store), await insert(store), await insert(store)
        for job_id, n in ((done, 5), (dead, 3), (young, 2)):
            [lease] = await store.claim([job_id], "w", 3600)
            for seq in range(1, n + 1):
                assert await store.steps.save(job_id, lease.token, step(seq, f"s{seq}"))
            if job_id == dead:
                await store.finish_failed(lease, status=JobStatus.DEAD, outcome="failed", error="x")
            else:
                assert await store.complete(lease, None)
        assert await store.steps.prune("finished", 3600, 10, 10) == 0  # none old enough
        assert await store.steps.prune("finished", -60, 10, 4) == 4  # a page of at most 4
        assert await store.steps.prune("finished", -60, 1, 10) == 1  # the oldest job's last
        assert await store.steps.prune("finished", -60, 10, 10) == 2  # then the next job's
        assert await store.steps.load(done, 0, 10) == await store.steps.load(young, 0, 10) == []
        assert len(await store.steps.load(dead, 0, 10)) == 3  # another kind
        assert await store.steps.prune("dead", -60, 10, 10) == 3
        assert await store.maintenance.prune_dead(-60, 10) == 1  # the job goes after its steps

    scenario(ports, body)
