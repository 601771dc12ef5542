"""Submitting jobs, one or a batch: defaults, the durable INSERT, then the enqueue. A base
class of :class:`asyncz.service.JobService` (one service object, several rooms).

The order is the same for one job and for a batch: the rows are committed (one statement)
before their ids reach Redis (one pipelined round trip); when Redis fails in between, the
jobs are still accepted and recovery enqueues them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from asyncz.broker.dispatch import Dispatch
from asyncz.errors import (
    AsyncZError,
    BatchSizeError,
    BrokerUnavailableError,
    DuplicateJobError,
    UnknownQueueError,
)
from asyncz.faults import crash_point
from asyncz.jobs import JobStatus, NewJob
from asyncz.ports import BatchItem, JobBroker, JobStore, MetricsSink, Row, Submitted
from asyncz.settings import Settings
from asyncz.sweeps import dispatch_of
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")

MAX_BATCH_JOBS = 500


class Submits:
    store: JobStore
    broker: JobBroker
    registry: TaskRegistry
    settings: Settings
    metrics: MetricsSink

    def complete_defaults(self, new: NewJob) -> NewJob:
        """Fill per-task then global defaults; raises UnknownTaskError for an unknown task."""
        spec = self.registry.get(new.task)
        s = self.settings
        if new.queue not in s.queue_list:  # no worker polls it: it would never run
            raise UnknownQueueError(
                f"unknown queue {new.queue!r}; this deployment runs {', '.join(s.queue_list)} "
                "(ASYNCZ_QUEUES)"
            )
        max_retries = new.max_retries
        if max_retries is None:
            max_retries = (
                spec.max_retries if spec.max_retries is not None else s.default_max_retries
            )
        timeout = new.timeout_seconds or spec.timeout_seconds or s.default_timeout_seconds
        return NewJob(
            task=new.task,
            payload=new.payload,
            queue=new.queue,
            priority=new.priority,
            max_retries=max_retries,
            timeout_seconds=min(timeout, s.max_timeout_seconds),
            delay_seconds=new.delay_seconds,
            run_at=new.run_at,
            idempotency_key=new.idempotency_key,
        )

    async def submit(self, new: NewJob) -> Submitted:
        """Commit the row, then enqueue its id. A Redis failure still returns the job."""
        new = self.complete_defaults(new)
        job_id = str(uuid.uuid4())
        row = await self.store.insert_job(job_id, new)
        if row is None:
            assert new.idempotency_key is not None
            existing = await self.store.get_by_idempotency_key(new.idempotency_key)
            if existing is None:  # the other job was purged between the two statements
                raise DuplicateJobError("unknown", "purged")
            raise DuplicateJobError(str(existing["id"]), existing["status"])
        self.metrics.add_metric("JobsSubmitted", "Count", 1)
        crash_point("submit.after_commit")  # chaos: the row is durable, Redis never hears
        it = Dispatch(job_id, new.queue, new.priority, row["run_at_ms"], row["due"])
        enqueued = await self.dispatch_quietly([it])
        return Submitted(job_id=job_id, status=JobStatus.QUEUED, enqueued=enqueued)

    async def submit_many(self, news: Sequence[NewJob]) -> list[BatchItem]:
        """A batch, all or nothing at validation (an error names the item's ``index``): one
        INSERT, then one enqueue. An item whose idempotency key exists is reported as a
        duplicate of that job; the others are accepted. One result per item, in order."""
        if not 1 <= len(news) <= MAX_BATCH_JOBS:
            raise BatchSizeError(f"a batch holds 1 to {MAX_BATCH_JOBS} jobs, not {len(news)}")
        completed = []
        for index, new in enumerate(news):
            try:
                completed.append(self.complete_defaults(new))
            except AsyncZError as exc:
                exc.args = (f"jobs[{index}]: {exc}",)
                exc.index = index
                raise
        items = [(str(uuid.uuid4()), new) for new in completed]
        rows = await self.store.insert_jobs(items)
        crash_point("submit.after_commit")  # chaos: the rows are durable, Redis never hears
        keys = [new.idempotency_key for (_, new), row in zip(items, rows, strict=True) if not row]
        existing = await self.store.get_by_idempotency_keys([k for k in keys if k]) if keys else {}
        dispatch = [
            Dispatch(job_id, new.queue, new.priority, row["run_at_ms"], row["due"])
            for (job_id, new), row in zip(items, rows, strict=True)
            if row is not None
        ]
        if dispatch:
            self.metrics.add_metric("JobsSubmitted", "Count", len(dispatch))
        enqueued = await self.dispatch_quietly(dispatch)
        return [
            _result(job_id, new, row, existing, enqueued)
            for (job_id, new), row in zip(items, rows, strict=True)
        ]

    async def enqueue_quietly(self, rows: Sequence[Row]) -> bool:
        """Enqueue the jobs of these rows (id, queue, priority, run_at, due)."""
        return await self.dispatch_quietly([dispatch_of(r) for r in rows])

    async def dispatch_quietly(self, items: Sequence[Dispatch]) -> bool:
        """Enqueue ids; when Redis is down, say so and rely on recovery (the rows are safe)."""
        if not items:
            return True
        try:
            await self.broker.enqueue(items)
            return True
        except BrokerUnavailableError as exc:
            log.warning("enqueue deferred to recovery: %s", exc)
            return False


def _result(
    job_id: str, new: NewJob, row: Row | None, existing: dict[str, Row], enqueued: bool
) -> BatchItem:
    if row is not None:
        return BatchItem(job_id, JobStatus.QUEUED.value, duplicate=False, enqueued=enqueued)
    other = existing.get(new.idempotency_key or "")
    if other is None:  # the other job was purged between the two statements
        return BatchItem(None, "purged", duplicate=True)
    return BatchItem(str(other["id"]), str(other["status"]), duplicate=True)
