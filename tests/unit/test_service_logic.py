"""The job service's retry, recovery and paging logic on the in-memory store and broker:
no servers, milliseconds per test (the same adapters pass the contract suite)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from asyncz.errors import DuplicateJobError, InvalidCursorError, StoreUnavailableError
from asyncz.jobs import JobStatus, NewJob
from asyncz.service import JobService
from asyncz.testing import MemoryStore
from tests.support.memory import service

pytestmark = pytest.mark.unit


async def claim_one(svc: JobService) -> Any:
    [lease] = await svc.claim_next("w", ["default"], 1, 0.1, 3600)
    return lease


def test_a_failure_is_retried_later_with_backoff_then_dead_lettered() -> None:
    svc = service()

    async def scenario() -> list[Any]:
        job = await svc.submit(NewJob(task="fail", payload={}, max_retries=1))
        outcomes = [await svc.fail(await claim_one(svc), "boom")]
        # retried later: in the delayed set, not ready, nothing claimable now
        assert await svc.broker.backlog(["default"]) == {"default": (0, 1)}
        assert await svc.claim_next("w", ["default"], 1, 0.05, 3600) == []
        svc.store.jobs[job.job_id]["run_at"] = svc.store.jobs[job.job_id]["created_at"]  # type: ignore[attr-defined]
        # time passes (the row is due now): recovery puts the id in ready
        await svc.recover()
        outcomes.append(await svc.fail(await claim_one(svc), "boom again"))
        outcomes.append((await svc.get(job.job_id)).status)
        return outcomes

    first, second, final = asyncio.run(scenario())
    assert first.status is JobStatus.QUEUED and first.delay_seconds == 1.0  # 2 s x 2^0 x 0.5
    assert second.status is JobStatus.DEAD and final is JobStatus.DEAD
    metrics = svc.metrics.seen  # type: ignore[attr-defined]
    assert metrics["JobsRetried"] == 1 and metrics["JobsDeadLettered"] == 1


def test_backoff_grows_per_attempt_up_to_the_cap() -> None:
    svc = service(backoff_base_seconds=1.0, backoff_max_seconds=3.0)

    async def scenario() -> list[float]:
        job = await svc.submit(NewJob(task="fail", payload={}, max_retries=5))
        delays = []
        for _ in range(4):
            out = await svc.fail(await claim_one(svc), "boom")
            delays.append(out.delay_seconds)
            svc.store.jobs[job.job_id]["run_at"] = svc.store.jobs[job.job_id]["created_at"]  # type: ignore[attr-defined]
            await svc.recover()
        return delays

    assert asyncio.run(scenario()) == [0.5, 1.0, 1.5, 1.5]  # 0.5 x min(3, 1, 2, 4, 8)


def test_recovery_requeues_a_stale_lease_and_dead_letters_an_exhausted_one() -> None:
    svc = service()

    async def scenario() -> Any:
        again = await svc.submit(NewJob(task="echo", payload={}, max_retries=1))
        done = await svc.submit(NewJob(task="echo", payload={}, max_retries=0))
        await svc.claim_next("w", ["default"], 2, 0.1, 3600)
        await asyncio.sleep(0.02)  # both leases go stale (lease timeout 0.01 s)
        report = await svc.recover()
        return report, again.job_id, done.job_id, await svc.broker.backlog(["default"])

    report, again, done, backlog = asyncio.run(scenario())
    assert report.requeued == [again] and report.dead == [done]
    assert backlog == {"default": (1, 0)}  # the requeued one is ready again


def test_claimed_leases_survive_an_outage_while_the_missed_ids_are_put_back() -> None:
    """A claim committed: its leases run even when putting back the ids it could not claim
    fails (PostgreSQL gone for that read); those stay queued and recovery restores them."""
    svc = service()

    async def unavailable(ids: Any) -> Any:
        raise StoreUnavailableError("database unavailable: try again shortly")

    async def scenario() -> Any:
        due = await svc.submit(NewJob(task="echo", payload={}))
        later = await svc.submit(NewJob(task="echo", payload={}))
        rows = svc.store.jobs  # type: ignore[attr-defined]
        rows[later.job_id]["run_at"] += timedelta(hours=1)  # its id is in ready, too early
        real, svc.store.unclaimed = svc.store.unclaimed, unavailable  # type: ignore[method-assign]
        leases = await svc.claim_next("w", ["default"], 2, 0.1, 3600)
        svc.store.unclaimed = real  # type: ignore[method-assign]
        lost = await svc.broker.backlog(["default"])
        await svc.recover()
        return due, leases, lost, await svc.broker.backlog(["default"])

    due, leases, lost, restored = asyncio.run(scenario())
    assert [lease.job_id for lease in leases] == [due.job_id]
    assert lost == {"default": (0, 0)}  # popped, not put back
    assert restored == {"default": (0, 1)}  # recovery: in the delayed set, as it should be


def test_recovery_restores_every_queued_id_across_runs_within_its_cap() -> None:
    svc = service(recovery_batch_size=10, recovery_max_batches=2)

    async def scenario() -> list[int]:
        for i in range(55):
            await svc.submit(NewJob(task="echo", payload={"i": i}, delay_seconds=600))
        svc.broker.delayed.clear()  # type: ignore[attr-defined]  # a FLUSHALL
        counts = []
        for _ in range(3):
            await svc.recover()
            counts.append(len(svc.broker.delayed["default"]))  # type: ignore[attr-defined]
        return counts

    assert asyncio.run(scenario()) == [20, 40, 55]


def test_paging_follows_the_cursor_and_refuses_a_forged_one() -> None:
    svc = service()

    async def scenario() -> list[str]:
        ids = [(await svc.submit(NewJob(task="echo", payload={"i": i}))).job_id for i in range(5)]
        seen, cursor = [], None
        while True:
            page = await svc.list_jobs(limit=2, cursor=cursor)
            seen += [j.id for j in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        with pytest.raises(InvalidCursorError):
            await svc.list_jobs(cursor="not-a-cursor")
        assert seen == list(reversed(ids))
        return seen

    assert len(asyncio.run(scenario())) == 5


def test_the_series_has_every_minute_of_the_window_oldest_first() -> None:
    from datetime import UTC, datetime, timedelta

    svc = service()
    assert isinstance(svc.store, MemoryStore)
    now = datetime.now(UTC)
    job_id = asyncio.run(svc.submit(NewJob(task="echo", payload={}))).job_id
    svc.store.jobs[job_id].update(status=JobStatus.DEAD, finished_at=now - timedelta(minutes=3))
    old = asyncio.run(svc.submit(NewJob(task="echo", payload={}))).job_id
    svc.store.jobs[old].update(status=JobStatus.DEAD, finished_at=now - timedelta(minutes=90))
    series = asyncio.run(svc.series(60))
    assert len(series) == 60 and series[-1]["minute"] >= now.strftime("%Y-%m-%dT%H:%M:00Z")
    assert [m["minute"] for m in series] == sorted(m["minute"] for m in series)
    assert sum(m["dead"] for m in series) == 1  # the one 90 minutes ago is outside
    that = {m["minute"]: m for m in series}[
        (now - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:00Z")
    ]
    assert that["dead"] == 1 and that["completed"] == that["failed"] == 0


def test_a_duplicate_submit_of_a_queued_job_enqueues_it_again() -> None:
    """The first submit crashed after its commit (the id never reached Redis): a resubmit
    with the same key answers duplicate and puts the id in Redis, so it runs now."""
    svc = service()
    job_id = "00000000-0000-4000-8000-000000000001"

    async def go() -> None:
        new = NewJob(task="echo", payload={}, idempotency_key="k-crashed")
        assert await svc.store.insert_job(job_id, svc.complete_defaults(new)) is not None
        assert svc.broker.ready == {}  # type: ignore[attr-defined]
        with pytest.raises(DuplicateJobError) as info:
            await svc.submit(new)
        assert info.value.job_id == job_id
        assert job_id in svc.broker.ready["default"]  # type: ignore[attr-defined]
        del svc.broker.ready["default"][job_id]  # type: ignore[attr-defined]
        [item] = await svc.submit_many([new])
        assert item.duplicate and item.job_id == job_id
        assert job_id in svc.broker.ready["default"]  # type: ignore[attr-defined]

    asyncio.run(go())


def test_a_key_whose_job_was_purged_meanwhile_makes_a_new_job() -> None:
    """The INSERT met the key, then the holder was purged before it could be read: the key
    is free again, so the submit stores the job (one or a batch) instead of answering
    "duplicate of nothing"."""
    svc = service()
    store: Any = svc.store

    async def go() -> tuple[Any, Any]:
        for key in ("k-one", "k-batch"):
            await svc.store.insert_job(key.replace("k-", "10000000-0000-4000-8000-00000000000")
                                       [:36].ljust(36, "0"), svc.complete_defaults(
                NewJob(task="echo", payload={}, idempotency_key=key)))  # fmt: skip
        real_one, real_many = store.get_by_idempotency_key, store.get_by_idempotency_keys

        async def purged_one(key: str) -> Any:
            store.jobs = {i: j for i, j in store.jobs.items() if j["idempotency_key"] != key}
            store.get_by_idempotency_key = real_one
            return None

        async def purged_many(keys: Any) -> Any:
            store.jobs = {i: j for i, j in store.jobs.items() if j["idempotency_key"] not in keys}
            store.get_by_idempotency_keys = real_many
            return {}

        store.get_by_idempotency_key = purged_one
        store.get_by_idempotency_keys = purged_many
        one = await svc.submit(NewJob(task="echo", payload={}, idempotency_key="k-one"))
        [item] = await svc.submit_many([NewJob(task="echo", payload={}, idempotency_key="k-batch")])
        return one, item

    one, item = asyncio.run(go())
    assert one.job_id in store.jobs and store.jobs[one.job_id]["idempotency_key"] == "k-one"
    assert not item.duplicate and item.job_id in store.jobs
