"""What a task returns: a result PostgreSQL cannot store (NaN, NUL) or one past
``ASYNCZ_MAX_RESULT_BYTES`` fails its own attempt with a clear error, and no other."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from asyncz.errors import InvalidInputError
from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.tasks import task
from tests.support.ledger import rows
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration


def test_one_unstorable_result_fails_only_its_own_attempt_in_a_batch(settings: Settings) -> None:
    from asyncz.worker.batching import CompletionBatcher

    async def scenario() -> list[Any]:
        async with open_service(settings) as svc:
            for i in range(3):
                await svc.submit(NewJob(task="echo", payload={"i": i}, max_retries=0))
            leases = await svc.claim_next("w-1", settings.queue_list, 3, 2.0, 3600)
            assert len(leases) == 3
            batcher = CompletionBatcher(svc)
            results = [{"ok": 1}, {"bad": float("nan")}, {"ok": 3}]
            return await asyncio.gather(
                *(batcher.complete(lease, r) for lease, r in zip(leases, results, strict=True)),
                return_exceptions=True,
            )

    outcomes = asyncio.run(scenario())
    assert outcomes[0] is True and outcomes[2] is True, outcomes
    assert isinstance(outcomes[1], InvalidInputError), outcomes
    counts = rows(
        settings.database_url or "", "SELECT status, count(*) AS n FROM jobs GROUP BY status"
    )
    assert {r["status"]: r["n"] for r in counts} == {"completed": 2, "processing": 1}


@task("unstorable_result")
def _unstorable_result(payload: dict[str, Any]) -> Any:
    kind = payload["kind"]
    if kind == "nan":
        return {"x": [1.0, math.nan]}
    if kind == "nul":
        return {"text": "a\u0000b"}
    return {"fine": True}


def test_a_task_returning_nan_or_nul_fails_with_a_clear_error_others_complete(
    settings: Settings,
) -> None:
    async def scenario() -> dict[str, Any]:
        async with open_service(settings) as svc:
            ids = {}
            for kind in ("nan", "nul", "fine", "fine2"):
                sub = await svc.submit(
                    NewJob(task="unstorable_result", payload={"kind": kind}, max_retries=0)
                )
                ids[kind] = sub.job_id
            async with running_worker(svc, concurrency=4):
                for _ in range(200):
                    jobs = {k: await svc.get(i) for k, i in ids.items()}
                    if all(
                        j.status in (JobStatus.COMPLETED, JobStatus.DEAD) for j in jobs.values()
                    ):
                        break
                    await asyncio.sleep(0.1)
            return jobs

    jobs = asyncio.run(scenario())
    assert (
        jobs["fine"].status is JobStatus.COMPLETED and jobs["fine2"].status is JobStatus.COMPLETED
    )
    for kind in ("nan", "nul"):
        assert jobs[kind].status is JobStatus.DEAD, jobs[kind]
        assert "result is not storable as JSON" in (jobs[kind].last_error or ""), jobs[kind]


@task("big_result")
def _big_result(payload: dict[str, Any]) -> Any:
    return {"blob": "x" * int(payload["bytes"])}


def test_a_result_past_the_limit_fails_with_an_error_naming_the_setting(
    settings: Settings,
) -> None:
    small = settings.model_copy(update={"max_result_bytes": 1000})

    async def scenario() -> Any:
        async with open_service(small) as svc:
            sub = await svc.submit(NewJob(task="big_result", payload={"bytes": 5000}))
            async with running_worker(svc, concurrency=1):
                while (await svc.get(sub.job_id)).attempts == 0 or (
                    await svc.get(sub.job_id)
                ).status is JobStatus.PROCESSING:
                    await asyncio.sleep(0.05)
            return await svc.get(sub.job_id)

    big = asyncio.run(scenario())
    assert "ASYNCZ_MAX_RESULT_BYTES" in (big.last_error or ""), big
