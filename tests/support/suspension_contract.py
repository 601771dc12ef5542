"""The suspension part of the store and broker contract (see tests/support/contract.py):
a durable job's attempt ends suspended through the lease fence, its wake is a claim that
keeps its progress and counts no try, and recovery finds a due suspended row. Run against
the in-memory adapters and against PostgreSQL + Redis."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from asyncz.jobs import AttemptOutcome, JobStatus
from asyncz.port_types import Dispatch, epoch_ms
from tests.support.contract import Ports, insert, scenario


def test_a_suspension_is_fenced_and_its_wake_is_a_claim_that_counts_no_try(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store, max_retries=0)
        [lease] = await store.claim([job_id], "w", 3600)
        assert await store.save_progress([(lease, 0.5, "half")]) == {job_id}
        assert await store.steps.suspend(_other(lease), 0.0, "x") is None  # another token
        row = await store.steps.suspend(lease, 0.2, "sleep 'nap' until soon")
        assert row is not None and row["status"] == "suspended" and str(row["id"]) == job_id
        assert await store.steps.suspend(lease, 0.2, "again") is None  # the lease is gone
        job = await store.get_job(job_id)
        assert job.status is JobStatus.SUSPENDED and job.lease_token is None
        assert (job.suspensions, job.suspended_for) == (1, "sleep 'nap' until soon")
        first_start = job.started_at
        assert await store.claim([job_id], "w", 3600) == []  # not due yet
        [waking] = await store.unclaimed([job_id])
        assert waking["wake"] and not waking["due"]
        await asyncio.sleep(0.25)
        [woken] = await store.claim([job_id], "w2", 3600)
        assert (woken.attempt, woken.suspensions, woken.tries_used) == (2, 1, 1)
        job = await store.get_job(job_id)
        assert (job.status, job.progress, job.progress_message) == (
            JobStatus.PROCESSING, 0.5, "half")  # fmt: skip
        assert job.started_at == first_start  # the job's first start
        attempts = await store.list_attempts(job_id)
        assert [a.outcome for a in attempts][:1] == [AttemptOutcome.SUSPENDED]

    scenario(ports, body)


def _other(lease: Any) -> Any:
    return replace(lease, token="00000000-0000-0000-0000-000000000000")


def test_a_suspended_job_is_cancelled_at_once_and_a_cancel_during_the_attempt_wins(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        await store.steps.suspend(lease, 0.0, "sleep")
        row = await store.cancel(job_id)
        assert row is not None and row["status"] == "cancelled"
        job = await store.get_job(job_id)
        assert job.status is JobStatus.CANCELLED and job.finished_at is not None
        assert await store.claim([job_id], "w", 3600) == []
        assert await store.unclaimed([job_id]) == []

        other = await insert(store)
        [lease] = await store.claim([other], "w", 3600)
        await store.cancel(other)  # flagged while it runs
        row = await store.steps.suspend(lease, 60.0, "sleep")
        assert row is not None and row["status"] == "cancelled"

    scenario(ports, body)


def test_recovery_scans_due_suspended_rows_only(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        due, later = await insert(store), await insert(store)
        for job_id, delay in ((due, 0.0), (later, 3600.0)):
            [lease] = await store.claim([job_id], "w", 3600)
            await store.steps.suspend(lease, delay, "sleep")
        rows = await store.maintenance.scan_due_suspended(None, 10)
        assert [str(r["id"]) for r in rows] == [due] and rows[0]["due"]
        after = (rows[0]["run_at"], str(rows[0]["id"]))
        assert await store.maintenance.scan_due_suspended(after, 10) == []
        # its id goes where recovery puts it, and the claim is its wake
        await broker.enqueue([Dispatch(due, "default", 0, epoch_ms(rows[0]["run_at"]), True)])
        assert await broker.pop(["default"], 1, 0.5) == [due]
        assert [lease.job_id for lease in await store.claim([due], "w", 3600)] == [due]

    scenario(ports, body)
