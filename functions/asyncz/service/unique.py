"""Unique jobs: a submit whose ``unique_key`` a job holds (within that job's scope) creates
nothing and is answered with the holder; with ``debounce`` the holder, while it has not
started, takes the newer submit's payload and start, when it is of the same task and API
key. A key held by another API key's job is refused (``UniqueKeyHeldError``) without
naming the holder. A part of :class:`asyncz.service.submitting.Submitting`.

Not the idempotency key: that one names one request and dedupes it for as long as its job
exists; a unique key names a piece of work and is free again once its holder leaves the
scope (docs/flow-control.md, "Unique jobs"). PostgreSQL's partial unique index decides who
holds a key, so concurrent submits make one job.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from asyncz.errors import (
    BrokerUnavailableError,
    DuplicateJobError,
    OutcomeUnknownError,
    StoreOutcomeUnknownError,
    UniqueKeyHeldError,
)
from asyncz.faults import crash_point
from asyncz.jobs import JobStatus, NewJob
from asyncz.port_types import Dispatch, Row, SubmitOutcome
from asyncz.ports import JobStore, MetricsSink
from asyncz.service.enqueue import Enqueuer

log = logging.getLogger("asyncz.service")

# Tries of an INSERT whose key's holder left the scope before it could be read (the key is
# free again): more than one in a row is a race nobody runs on purpose.
KEY_ROUNDS = 3

# After an INSERT whose answer was lost, ``resolve(job_id, new, look=...)``: the row's
# {"run_at_ms", "due"} when this job was stored, None when the idempotency key is another
# job's; else it raises (Submitting._resolve_insert).
Resolve = Callable[..., Awaitable[Row | None]]


class UniqueSubmits:
    def __init__(self, store: JobStore, enqueuer: Enqueuer, metrics: MetricsSink) -> None:
        self.store = store
        self.enqueuer = enqueuer
        self.metrics = metrics

    async def submit(self, job_id: str, new: NewJob, resolve: Resolve) -> SubmitOutcome:
        """Insert ``new`` (defaults completed) unless its key is held; the new job, the
        holder (``duplicate``), or the holder debounced (``debounced``)."""
        assert new.unique_key is not None
        for _ in range(KEY_ROUNDS):
            try:
                row = await self.store.unique.insert(job_id, new)
            except StoreOutcomeUnknownError as exc:
                row = await resolve(job_id, new, look=exc.answering)
                row = {**row, "id": job_id} if row is not None else None
            if row is not None and row["id"] == job_id:
                crash_point("submit.after_commit")
                it = Dispatch(job_id, new.queue, new.priority, row["run_at_ms"], row["due"])
                enqueued = await self.enqueuer.dispatch_quietly([it])
                return SubmitOutcome(job_id, JobStatus.QUEUED, enqueued)
            if row is not None:  # debounced: the holder's start moved
                enqueued = await self.reschedule_quietly(row)
                return SubmitOutcome(row["id"], JobStatus(row["status"]), enqueued,
                                     duplicate=True, debounced=True)  # fmt: skip
            if new.idempotency_key is not None:
                existing = await self.store.get_by_idempotency_key(new.idempotency_key)
                if existing is not None:
                    await self.requeue([existing])
                    raise DuplicateJobError(str(existing["id"]), existing["status"])
            holder = (await self.store.unique.holders([new.unique_key])).get(new.unique_key)
            if holder is not None:
                await self.requeue([holder])
                if holder["submitted_by_key_id"] != new.submitted_by_key_id:
                    raise UniqueKeyHeldError(
                        f"unique key {new.unique_key!r} is held by a job another API key "
                        "submitted; nothing was stored"
                    )
                return SubmitOutcome(str(holder["id"]), JobStatus(holder["status"]), True,
                                     duplicate=True)  # fmt: skip
            # the holder left its scope between the two statements: the key is free again
        raise OutcomeUnknownError(
            f"unique key {new.unique_key!r} changed hands {KEY_ROUNDS} times while this "
            "submit looked; nothing was stored, try again"
        )

    async def holders_of(
        self, news: Sequence[NewJob], rows: Sequence[Row | None], skip: set[str | None]
    ) -> dict[str, Row]:
        """The holders of the unique keys of the items not stored (``rows[i] is None``)
        whose idempotency key is not in ``skip`` (those are its duplicates)."""
        keys = {
            new.unique_key for new, row in zip(news, rows, strict=True)
            if row is None and new.unique_key is not None and new.idempotency_key not in skip
        }  # fmt: skip
        return await self.store.unique.holders(sorted(k for k in keys if k)) if keys else {}

    async def requeue(self, rows: Sequence[Row]) -> None:
        await self.enqueuer.enqueue_queued(rows)

    async def reschedule_quietly(self, row: Row) -> bool:
        """Move a debounced job's id to its new start in Redis. When Redis fails, Postgres
        still holds the truth: a claim checks run_at (an early pop puts the id back at its
        time) and recovery enqueues the job when it is due."""
        it = Dispatch(str(row["id"]), row["queue"], row["priority"], row["run_at_ms"], row["due"])
        try:
            await self.enqueuer.broker.reschedule([it])
            return True
        except BrokerUnavailableError as exc:
            log.warning("debounce: Redis not moved, recovery will: %s", exc)
            return False
