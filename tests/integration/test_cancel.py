"""A cancel that lands while an attempt runs: the job ends cancelled whatever the attempt
does next, and the attempt log keeps what really happened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.settings import Settings
from tests.support.ledger import rows
from tests.support.settings import make_settings, open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration


async def _claim_one(svc: Any, settings: Settings) -> Any:
    [lease] = await svc.claim_next("w-1", settings.queue_list, 1, 2.0, 3600)
    return lease


@pytest.mark.parametrize(
    ("outcome", "retries"),
    [(AttemptOutcome.FAILED, 3), (AttemptOutcome.TIMED_OUT, 3), (AttemptOutcome.FAILED, 0)],
)
def test_cancel_requested_during_a_failing_attempt_ends_cancelled(
    settings: Settings, outcome: AttemptOutcome, retries: int
) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=retries))
            lease = await _claim_one(svc, settings)
            assert await svc.cancel(sub.job_id) is JobStatus.PROCESSING  # flagged only
            done = await svc.fail(lease, "boom", outcome)
            return done, await svc.get(sub.job_id)

    done, job = asyncio.run(scenario())
    assert done is not None and done.status is JobStatus.CANCELLED
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    [attempt] = rows(
        settings.database_url or "",
        "SELECT outcome FROM job_attempt_history WHERE job_id=%s",
        (job.id,),
    )
    assert attempt["outcome"] == outcome.value  # the attempt log keeps what really happened


def test_cancel_during_an_attempt_that_then_times_out_ends_cancelled(
    clean: None, pg_url: str, redis_server_url: str, tmp_path: Any
) -> None:
    # the heartbeat is slower than the timeout: the cancel request never reaches the worker
    settings = make_settings(
        pg_url, redis_server_url, heartbeat_seconds=30.0, artifact_dir=str(tmp_path)
    )

    async def scenario() -> Any:
        async with open_service(settings) as svc:
            sub = await svc.submit(
                NewJob(task="sleep", payload={"seconds": 4}, timeout_seconds=2, max_retries=3)
            )
            async with running_worker(svc, concurrency=1):
                while (await svc.get(sub.job_id)).status is not JobStatus.PROCESSING:
                    await asyncio.sleep(0.05)
                await svc.cancel(sub.job_id)
                for _ in range(200):
                    job = await svc.get(sub.job_id)
                    if job.status is not JobStatus.PROCESSING:
                        break
                    await asyncio.sleep(0.05)
            return job

    job = asyncio.run(scenario())
    assert job.status is JobStatus.CANCELLED, f"ended {job.status} (cancel flag lost)"
    stranded = rows(
        settings.database_url or "",
        "SELECT id FROM jobs WHERE status = 'queued' AND cancel_requested",
    )
    assert stranded == []
