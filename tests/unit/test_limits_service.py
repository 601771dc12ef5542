"""Flow control in the job service, on the in-memory adapters: held-back jobs wait without
an attempt, slots come back however an attempt ends, and a claim the database did not answer
keeps its slots until their lease deadline."""

from __future__ import annotations

import asyncio
import json

import pytest

from asyncz.errors import StoreUnavailableError, UnknownQueueError
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.service import JobService
from tests.support.memory import service

pytestmark = pytest.mark.unit


def limited(**limits: object) -> JobService:
    return service(task_limits=json.dumps({"sleep": limits}), lease_timeout_seconds=60)


async def submit(svc: JobService, n: int, key: str | None = None) -> list[str]:
    return [
        (await svc.submit(NewJob(task="sleep", payload={}, concurrency_key=key))).job_id
        for _ in range(n)
    ]


def test_a_held_back_job_uses_no_attempt_and_a_completion_lets_the_next_one_go() -> None:
    async def go() -> None:
        svc = limited(concurrency=1)
        first, second = await submit(svc, 2)
        [lease] = await svc.claim_next("w", ["default"], 10, 0.05, 600)
        assert lease.job_id == first
        assert await svc.claim_next("w", ["default"], 10, 0.05, 600) == []
        job = await svc.get(second)
        assert (job.status, job.attempts) == (JobStatus.QUEUED, 0)
        assert await svc.held_reason(job) == "waiting for a concurrency slot of task sleep"
        assert await svc.complete(lease, None)
        assert [x.job_id for x in await svc.claim_next("w", ["default"], 10, 0.05, 600)] == [second]

    asyncio.run(go())


def test_a_claim_the_database_did_not_answer_keeps_its_slot_until_the_deadline() -> None:
    async def go() -> None:
        svc = limited(concurrency=1)
        await submit(svc, 2)

        async def down(*args: object) -> object:
            raise StoreUnavailableError("down")

        real = svc.store.claim
        svc.store.claim = down  # type: ignore[method-assign]
        with pytest.raises(StoreUnavailableError):
            await svc.claim_next("w", ["default"], 1, 0.05, 600)
        assert svc.limits.slots == {}  # not renewed by this worker any more ...
        svc.store.claim = real  # type: ignore[method-assign]
        await svc.recover()  # ... and its id back in Redis: the slot still counts
        assert await svc.claim_next("w", ["default"], 10, 0.05, 600) == []

    asyncio.run(go())


@pytest.mark.parametrize("ending", ["timed_out", "lost"])
def test_a_slot_is_held_while_the_thread_of_an_ended_attempt_runs_on(ending: str) -> None:
    async def go() -> None:
        svc = limited(concurrency=1)
        first, second = await submit(svc, 2)
        [lease] = await svc.claim_next("w", ["default"], 10, 0.05, 600)
        returned = svc.limits.hold_while_thread_runs(first)  # as the worker starts its thread
        assert returned is not None
        if ending == "timed_out":
            await svc.fail(lease, "TimeoutError", AttemptOutcome.TIMED_OUT)
        else:
            svc.store.jobs[first]["lease_token"] = "taken by another worker"
            assert (await svc.heartbeat([lease])).lost == {first}
        assert svc.limits.slots == {} and len(svc.limits.abandoned) == 1
        await svc.heartbeat([])  # renewed with no lease left to renew
        assert svc.broker.limits.slots["sleep"].keys() == svc.limits.abandoned.keys()
        assert await svc.claim_next("w", ["default"], 10, 0.05, 600) == []  # still held
        returned()  # the thread came back: the slot goes, and the held job with it
        await asyncio.sleep(0)
        assert svc.limits.abandoned == {} and svc.broker.limits.slots["sleep"] == {}
        [again] = await svc.claim_next("w", ["default"], 10, 0.05, 600)
        assert again.job_id == second

    asyncio.run(go())


def test_a_thread_that_returns_before_its_attempt_ends_leaves_the_slot_to_the_attempt() -> (
    None
):
    async def go() -> None:
        svc = limited(concurrency=1)
        first, second = await submit(svc, 2)
        [lease] = await svc.claim_next("w", ["default"], 10, 0.05, 600)
        returned = svc.limits.hold_while_thread_runs(first)
        assert returned is not None
        returned()
        assert await svc.complete(lease, None)
        assert svc.limits.abandoned == {}
        [again] = await svc.claim_next("w", ["default"], 10, 0.05, 600)
        assert again.job_id == second
        assert svc.limits.hold_while_thread_runs("an unlimited job") is None

    asyncio.run(go())


def test_a_paused_queue_starts_nothing_and_an_unknown_one_is_refused() -> None:
    async def go() -> None:
        svc = service()
        await svc.pause_queue("default")
        [job_id] = [(await svc.submit(NewJob(task="echo", payload={}))).job_id]
        assert await svc.claim_next("w", ["default"], 10, 0.05, 600) == []
        assert await svc.held_reason(await svc.get(job_id)) == "queue default is paused"
        assert (await svc.stats())["queues"]["default"]["paused"] is True
        await svc.resume_queue("default")
        assert len(await svc.claim_next("w", ["default"], 10, 0.05, 600)) == 1
        with pytest.raises(UnknownQueueError):
            await svc.pause_queue("nope")

    asyncio.run(go())
