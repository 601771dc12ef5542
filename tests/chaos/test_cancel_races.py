"""A cancel request meeting a fault: the job must still reach a terminal state.

Both tests failed before 660d2eb, which fixed them (docs/testing.md, the chaos tier):

* a worker that dies while its job has ``cancel_requested`` leaves the job ``queued``
  forever: recovery re-queues it, but claim and the re-enqueue scan both skip
  cancel-requested rows, and nothing else ever looks at it;
* a heartbeat that sees the cancel request (or a lost lease) while the attempt is already
  recording its result cancels the recording half-way: the job stays ``processing`` with no
  heartbeat, and the worker counts nothing and logs nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from asyncz.jobs import JobStatus, Lease, NewJob
from asyncz.worker.loop import WorkerLoop
from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, rows
from tests.support.private_servers import RedisServer
from tests.support.settings import open_service
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

TERMINAL = {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}


def test_worker_dies_after_a_cancel_request_the_job_ends_cancelled(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    [job_id] = asyncio.run(submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 30}}]))
    fleet = fleet_factory(settings)
    worker = fleet.start(concurrency=1)
    wait_until(
        lambda: rows(chaos_db, "SELECT 1 FROM jobs WHERE id=%s AND status='processing'", (job_id,)),
        timeout=20,
        interval=0.05,
        what="the worker to claim the job",
    )
    # the sandbox freezes, the user cancels (the job is flagged), the sandbox is killed
    # before any heartbeat could deliver the request
    os.killpg(worker.pid, signal.SIGSTOP)

    async def cancel() -> JobStatus:
        async with open_service(settings) as svc:
            return await svc.cancel(job_id)

    assert asyncio.run(cancel()) is JobStatus.PROCESSING
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(10)
    recovery = recovery_factory(settings, interval=0.5)
    deadline = time.monotonic() + settings.lease_timeout_seconds + 8
    seen: list[Any] = []
    while time.monotonic() < deadline:
        seen = rows(chaos_db, "SELECT status, cancel_requested FROM jobs WHERE id=%s", (job_id,))
        if seen[0]["status"] in ("completed", "dead", "cancelled"):
            break
        time.sleep(0.2)
    recovery.stop()
    assert seen[0]["status"] == "cancelled", (
        f"a cancel-requested job whose worker died ended {seen[0]}: it is never claimed nor "
        "re-enqueued again, so it stays there forever"
    )
    book = check_ledger(chaos_db, [job_id])
    assert list(book["jobs"][job_id]["outcomes"]) == ["lost"]


def test_cancel_request_while_the_attempt_records_its_result_strands_nothing(
    chaos_db: str, own_redis: RedisServer, tmp_path: Path
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=3.0)

    async def scenario() -> tuple[Any, dict[str, Any]]:
        async with open_service(settings) as svc:
            job_id = (await svc.submit(NewJob(task="echo", payload={"x": 1}))).job_id
            real_complete_many = svc.complete_many
            recording = asyncio.Event()

            async def slow_complete_many(done: Sequence[tuple[Lease, Any]]) -> set[str]:
                recording.set()
                await asyncio.sleep(1.5)  # a slow commit: a busy database, a slow network
                return await real_complete_many(done)

            svc.complete_many = slow_complete_many  # type: ignore[method-assign]
            stop = asyncio.Event()
            worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, concurrency=1, stop=stop)
            runner = asyncio.create_task(worker.run())
            try:
                await asyncio.wait_for(recording.wait(), 15)
                # the task has returned; the user cancels while its result is being recorded
                await svc.cancel(job_id)
                deadline = time.monotonic() + 2 * settings.lease_timeout_seconds
                while time.monotonic() < deadline:
                    job = await svc.get(job_id)
                    if job.status in TERMINAL:
                        break
                    await asyncio.sleep(0.1)
            finally:
                stop.set()
                summary = await asyncio.wait_for(runner, 20)
            return job, summary

    job, summary = asyncio.run(scenario())
    assert job.status in TERMINAL, (
        f"the job is still {job.status.value} with nobody heartbeating it: the heartbeat "
        "cancelled the attempt while it was recording its result"
    )
    assert summary["completed"] + summary["cancelled"] == 1, summary
