"""The worker's side of the job service: claim attempts, heartbeat their leases, record
their outcomes (retry with backoff, or dead-letter). A part of
:class:`asyncz.service.JobService`."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from asyncz.errors import (
    DB_TRANSIENT,
    BrokerUnavailableError,
    QueryTimeoutError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
)
from asyncz.faults import crash_point
from asyncz.jobs import MAX_WAITING_FOR, AttemptOutcome, JobStatus, Lease, out_of_retries
from asyncz.outbox.wake import Wake, no_wake
from asyncz.port_types import FailOutcome, HeartbeatOutcome, Row
from asyncz.ports import JobBroker, JobStore, MetricsSink
from asyncz.retry import backoff_delay
from asyncz.service.dependencies import Dependencies
from asyncz.service.enqueue import Enqueuer
from asyncz.service.limits import PAUSE_READ_SECONDS, Limits
from asyncz.settings import Settings

log = logging.getLogger("asyncz.service")

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class Leases:
    def __init__(
        self,
        store: JobStore,
        broker: JobBroker,
        enqueuer: Enqueuer,
        dependencies: Dependencies,
        settings: Settings,
        metrics: MetricsSink,
        rand: Callable[[], float],
        limits: Limits,
    ) -> None:
        self.store = store
        self.broker = broker
        self.enqueuer = enqueuer
        self.dependencies = dependencies
        self.settings = settings
        self.metrics = metrics
        self.rand = rand  # backoff jitter (a seam for tests)
        self.limits = limits
        # Ends committed: wake the events function (set by the composition root; never
        # awaited, at most one invoke a second per sandbox: asyncz.outbox.wake).
        self.ended: Wake = no_wake

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
        is not due (put back in the delayed set) or does not fit ``max_timeout`` (put back
        behind the ids ready now, so a worker short of time reaches the jobs that fit).
        """
        queues = await self.limits.runnable(queues)
        if not queues:  # every queue is paused: wait as a pop would, take nothing
            await asyncio.sleep(min(wait_seconds, PAUSE_READ_SECONDS))
            return []
        ids = await self.broker.pop(queues, max_items, wait_seconds)
        if not ids:
            return []
        ids = await self.limits.admit([i for i in ids if _is_uuid(i)])
        nonce = uuid.uuid4().hex
        try:
            try:
                leases = await self.store.claim(ids, worker_id, max_timeout, nonce) if ids else []
            except StoreOutcomeUnknownError as exc:
                # The claim may have committed: its tokens say which leases it took, and
                # those run now rather than wait for recovery's lease expiry.
                log.warning("claim answer lost (%s): reading back the leases it took", exc)
                leases = await self.store.adopt(ids, nonce)
            except QueryTimeoutError:
                # Cancelled at the server's statement timeout (a database slow or just
                # thawed): it claimed nothing, so every id goes back below.
                log.warning("claim of %d ids cancelled by the statement timeout", len(ids))
                leases = []
        except StoreUnavailableError:
            # Still unknown: keep the slots taken until their lease deadline (recovery
            # brings the ids back), but stop renewing them.
            self.limits.forget(ids)
            raise
        if len(leases) < len(ids):
            claimed = {lease.job_id for lease in leases}
            missed = [i for i in ids if i not in claimed]
            try:
                await self.limits.release(missed, ran=False)
                rows = await self.store.unclaimed(missed)
                await self.enqueuer.enqueue_quietly([_behind(r) for r in rows])
            except (*DB_TRANSIENT, BrokerUnavailableError) as exc:
                # The leases are this worker's now and must run: an id it missed is still
                # queued in PostgreSQL, where recovery's scan finds it (its slot, if any,
                # frees at its lease deadline).
                log.warning("could not put back %d unclaimed ids: %s", len(missed), exc)
        return leases

    async def promote(self, queues: Sequence[str]) -> int:
        """Due delayed ids, and ids held by a rate whose window opened, back to ready."""
        return await self.broker.promote_due(queues) + await self.limits.wake_due()

    async def heartbeat(self, leases: Sequence[Lease]) -> HeartbeatOutcome:
        """Renew these leases, and the slots of their attempts and of threads that outlived
        theirs (with no lease too)."""
        outcome = HeartbeatOutcome()
        held = await self.store.heartbeat(leases) if leases else {}
        await self.limits.refresh(held)
        await self.limits.release(lease.job_id for lease in leases if lease.job_id not in held)
        for lease in leases:
            if lease.job_id not in held:
                outcome.lost.add(lease.job_id)
            elif held[lease.job_id]:
                outcome.cancel_requested.add(lease.job_id)
        return outcome

    async def complete(self, lease: Lease, result: Any) -> bool:
        """Record success; False when the lease was lost (the result is discarded)."""
        return lease.job_id in await self.complete_many([(lease, result)])

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> set[str]:
        """Record a batch of successes in one statement; returns the ids whose lease held.
        Then the children of those that have any are settled (released when their last
        parent is done)."""
        held = await self.store.complete_many(done)
        await self.limits.release(lease.job_id for lease, _ in done)
        if held:
            self.metrics.add_metric("JobsCompleted", "Count", len(held))
            parents = [job_id for job_id, has_dependents in held.items() if has_dependents]
            if parents:
                crash_point("complete.before_dependents")  # chaos: recovery settles them
                await self.dependencies.settle_ids(parents)
            self.ended()
        return set(held)

    async def save_progress(self, reports: Sequence[tuple[Lease, float, str | None]]) -> set[str]:
        """Store what running tasks reported (fenced); returns the ids whose lease held."""
        return await self.store.save_progress(reports) if reports else set()

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> JobStatus | None:
        """End a durable task's attempt suspended: the job waits in PostgreSQL and its id
        in the delayed set until its wake (``delay_seconds`` from now); its slot is free
        meanwhile. Not a failure, not a try. ``cancelled`` when a cancel came meanwhile;
        None = lease lost."""
        row = await self.store.steps.suspend(lease, delay_seconds, reason[:MAX_WAITING_FOR])
        await self.limits.release([lease.job_id])
        if row is None:
            return None
        status = JobStatus(row["status"])
        if status is JobStatus.SUSPENDED:  # due at once when a wait was resolved meanwhile
            await self.enqueuer.enqueue_quietly([row])
        else:
            await self.dependencies.settle([row])
            self.ended()
        return status

    async def fail(
        self,
        lease: Lease,
        error: str,
        outcome: AttemptOutcome = AttemptOutcome.FAILED,
        *,
        final: bool = False,
    ) -> FailOutcome | None:
        """Record a failed attempt: retry later with backoff, or dead-letter (at once when
        ``final``: a failure retries cannot mend); None = lease lost."""
        delay = 0.0
        if outcome is AttemptOutcome.CANCELLED:
            status = JobStatus.CANCELLED
        elif final or out_of_retries(lease.tries_used, lease.max_retries):
            status = JobStatus.DEAD
        else:
            status = JobStatus.QUEUED
            delay = backoff_delay(
                lease.tries_used,
                self.settings.backoff_base_seconds,
                self.settings.backoff_max_seconds,
                self.rand,
            )
        row = await self.store.finish_failed(
            lease, status=status, outcome=outcome, error=error, delay_seconds=delay
        )
        await self.limits.release([lease.job_id])
        if row is None:
            return None
        status = JobStatus(row["status"])  # a cancel requested meanwhile wins (SQL decides)
        if status is JobStatus.QUEUED:
            self.metrics.add_metric("JobsRetried", "Count", 1)
            await self.enqueuer.enqueue_quietly([{**row, "due": delay <= 0}])
        elif status is JobStatus.DEAD:
            self.metrics.add_metric("JobsDeadLettered", "Count", 1)
        if status is not JobStatus.QUEUED:
            await self.dependencies.settle([row])
            self.ended()
        return FailOutcome(status, delay if status is JobStatus.QUEUED else 0.0)


def _behind(row: Row) -> Row:
    """A due row put back goes behind the ids ready now: its ready score is now, not its
    run_at (an ordering in Redis only; the row keeps its run_at)."""
    return {**row, "run_at": max(row["run_at"], datetime.now(UTC))} if row["due"] else row


def _is_uuid(value: str) -> bool:
    """A job id as we write them (PostgreSQL would refuse the whole claim over one bad id)."""
    return _UUID.fullmatch(value) is not None
