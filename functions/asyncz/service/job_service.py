"""The job service: submit, claim, heartbeat, finish, recover, replay, cancel.

Depends only on the store and broker interfaces (:mod:`asyncz.ports`) and on the pure
domain; it never imports a driver, boto3, FastAPI or Powertools.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from asyncz.errors import (
    InvalidTransitionError,
    JobNotFoundError,
    OutcomeUnknownError,
    StoreOutcomeUnknownError,
)
from asyncz.jobs import (
    Attempt,
    AttemptOutcome,
    Job,
    JobStatus,
    Lease,
    out_of_retries,
)
from asyncz.maintenance.periodic import Scheduler
from asyncz.maintenance.sweeps import Sweeps
from asyncz.pagination import decode_cursor, encode_cursor, fit_page
from asyncz.ports import (
    FailOutcome,
    HeartbeatOutcome,
    JobBroker,
    JobStore,
    MetricsSink,
    NullMetrics,
    Page,
)
from asyncz.retry import backoff_delay
from asyncz.service.submitting import Submits
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class JobService(Submits, Sweeps, Scheduler):
    def __init__(
        self,
        store: JobStore,
        broker: JobBroker,
        registry: TaskRegistry,
        settings: Settings,
        *,
        metrics: MetricsSink | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.broker = broker
        self.registry = registry
        self.settings = settings
        self.metrics: MetricsSink = metrics or NullMetrics()
        self._rand = rand

    # --- read --------------------------------------------------------------------------

    async def get(self, job_id: str) -> Job:
        job = await self.store.get_job(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return job

    async def attempts(self, job_id: str) -> list[Attempt]:
        await self.get(job_id)
        return await self.store.list_attempts(job_id)

    async def list_jobs(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        jobs = await self.store.list_jobs(
            status=status, queue=queue, task=task, limit=limit, after=decode_cursor(cursor)
        )
        kept = fit_page(jobs)
        last = kept[-1] if len(jobs) == limit or len(kept) < len(jobs) else None
        return Page(kept, encode_cursor(last.created_at, last.id) if last else None)

    async def list_dead(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        jobs = await self.store.list_dead(
            queue=queue, task=task, limit=limit, after=decode_cursor(cursor)
        )
        kept = fit_page(jobs)
        last = kept[-1] if len(jobs) == limit or len(kept) < len(jobs) else None
        return Page(
            kept, encode_cursor(last.finished_at, last.id) if last and last.finished_at else None
        )

    # --- operator actions ----------------------------------------------------------------

    async def cancel(self, job_id: str) -> JobStatus:
        """Cancel a queued job now, or flag a running one (it stops at its next heartbeat)."""
        with _outcome_of("cancel", job_id):
            row = await self.store.cancel(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value} and cannot be cancelled", status=job.status
            )
        return JobStatus(row["status"])

    async def replay(self, job_id: str) -> Job:
        with _outcome_of("replay", job_id):
            row = await self.store.replay(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value}; only dead jobs can be replayed",
                status=job.status,
            )
        await self.enqueue_quietly([row])
        return await self.get(job_id)

    async def replay_dead(
        self, *, queue: str | None = None, task: str | None = None, limit: int = 100
    ) -> list[str]:
        with _outcome_of("bulk replay", None):
            rows = await self.store.replay_dead(queue=queue, task=task, limit=limit)
        await self.enqueue_quietly(rows)
        return [str(r["id"]) for r in rows]

    async def purge(self, job_id: str) -> None:
        with _outcome_of("purge", job_id):
            purged = await self.store.purge_dead(job_id)
        if not purged:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value}; only dead jobs can be purged",
                status=job.status,
            )

    # --- worker side -------------------------------------------------------------------

    async def claim_next(
        self,
        worker_id: str,
        queues: Sequence[str],
        max_items: int,
        wait_seconds: float,
        max_timeout: int,
    ) -> list[Lease]:
        """Take up to ``max_items`` ids from Redis and claim them in one fenced statement.

        An id that cannot be claimed is a duplicate delivery (skipped), or a queued job that
        is not due or does not fit ``max_timeout`` (put back where it belongs).
        """
        ids = await self.broker.pop(queues, max_items, wait_seconds)
        if not ids:
            return []
        ids = [i for i in ids if _is_uuid(i)]
        leases = await self.store.claim(ids, worker_id, max_timeout)
        if len(leases) < len(ids):
            claimed = {lease.job_id for lease in leases}
            missed = [i for i in ids if i not in claimed]
            await self.enqueue_quietly(await self.store.unclaimed(missed))
        return leases

    async def promote(self, queues: Sequence[str]) -> int:
        return await self.broker.promote_due(queues)

    async def heartbeat(self, leases: Sequence[Lease]) -> HeartbeatOutcome:
        outcome = HeartbeatOutcome()
        if not leases:
            return outcome
        held = await self.store.heartbeat(leases)
        for lease in leases:
            if lease.job_id not in held:
                outcome.lost.add(lease.job_id)
            elif held[lease.job_id]:
                outcome.cancel_requested.add(lease.job_id)
        return outcome

    async def complete(self, lease: Lease, result: Any) -> bool:
        """Record success; False when the lease was lost (the result is discarded)."""
        ok = await self.store.complete(lease, result)
        if ok:
            self.metrics.add_metric("JobsCompleted", "Count", 1)
        return ok

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> set[str]:
        """Record a batch of successes in one statement; returns the ids whose lease held."""
        held = await self.store.complete_many(done)
        if held:
            self.metrics.add_metric("JobsCompleted", "Count", len(held))
        return held

    async def save_progress(self, reports: Sequence[tuple[Lease, float, str | None]]) -> set[str]:
        """Store what running tasks reported (fenced); returns the ids whose lease held."""
        return await self.store.save_progress(reports) if reports else set()

    async def fail(
        self, lease: Lease, error: str, outcome: AttemptOutcome = AttemptOutcome.FAILED
    ) -> FailOutcome | None:
        """Record a failed attempt: retry later with backoff, or dead-letter; None = lease lost."""
        delay = 0.0
        if outcome is AttemptOutcome.CANCELLED:
            status = JobStatus.CANCELLED
        elif out_of_retries(lease.tries_used, lease.max_retries):
            status = JobStatus.DEAD
        else:
            status = JobStatus.QUEUED
            delay = backoff_delay(
                lease.tries_used,
                self.settings.backoff_base_seconds,
                self.settings.backoff_max_seconds,
                self._rand,
            )
        row = await self.store.finish_failed(
            lease, status=status, outcome=outcome, error=error, delay_seconds=delay
        )
        if row is None:
            return None
        status = JobStatus(row["status"])  # a cancel requested meanwhile wins (SQL decides)
        if status is JobStatus.QUEUED:
            self.metrics.add_metric("JobsRetried", "Count", 1)
            await self.enqueue_quietly([{**row, "due": delay <= 0}])
        elif status is JobStatus.DEAD:
            self.metrics.add_metric("JobsDeadLettered", "Count", 1)
        return FailOutcome(status, delay if status is JobStatus.QUEUED else 0.0)


@contextmanager
def _outcome_of(action: str, job_id: str | None) -> Iterator[None]:
    """An operator action whose answer from the database was lost may have been done:
    say so (retrying it is safe: a done action answers 409/404 the second time)."""
    try:
        yield
    except StoreOutcomeUnknownError as exc:
        about = f" on job {job_id}" if job_id else ""
        raise OutcomeUnknownError(
            f"the database did not answer in time: the {action}{about} may have been done; "
            "check the job's status, or try again (a second try is safe)",
            job_id=job_id,
        ) from exc


def _is_uuid(value: str) -> bool:
    """A job id as we write them (PostgreSQL would refuse the whole claim over one bad id)."""
    return _UUID.fullmatch(value) is not None
