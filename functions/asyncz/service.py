"""The job service: submit, claim, heartbeat, finish, recover, replay, cancel.

Depends only on the store and broker interfaces (:mod:`asyncz.ports`) and on the pure
domain; it never imports a driver, boto3, FastAPI or Powertools.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from asyncz.broker.dispatch import Dispatch, epoch_ms
from asyncz.errors import (
    BrokerUnavailableError,
    DuplicateJobError,
    InvalidCursorError,
    InvalidTransitionError,
    JobNotFoundError,
    UnknownQueueError,
)
from asyncz.faults import crash_point
from asyncz.jobs import (
    Attempt,
    AttemptOutcome,
    Job,
    JobStatus,
    Lease,
    NewJob,
    RecoveryReport,
    out_of_retries,
)
from asyncz.pagination import decode_cursor, encode_cursor, fit_page
from asyncz.ports import (
    FailOutcome,
    HeartbeatOutcome,
    JobBroker,
    JobStore,
    MetricsSink,
    NullMetrics,
    Page,
    Row,
    SubmitBroker,
    SubmitStore,
    Submitted,
)
from asyncz.retry import backoff_delay
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")


def _dispatch(row: Row) -> Dispatch:
    return Dispatch(
        job_id=str(row["id"]),
        queue=row["queue"],
        priority=row["priority"],
        run_at_ms=epoch_ms(row["run_at"]),
        due=bool(row.get("due", True)),
    )


class Submitter:
    """The submit path on its own: commit the row, then enqueue its id.

    :class:`JobService` submits through one built on its pools; the api Lambda's submit lane
    builds one on blocking adapters whose coroutines never suspend (see
    :func:`asyncz.runtime.drive`), so both run this one implementation.
    """

    def __init__(
        self,
        store: SubmitStore,
        broker: SubmitBroker,
        registry: TaskRegistry,
        settings: Settings,
        metrics: MetricsSink,
    ) -> None:
        self.store = store
        self.broker = broker
        self.registry = registry
        self.settings = settings
        self.metrics = metrics

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

    async def enqueue_quietly(self, rows: Sequence[Row]) -> bool:
        """Enqueue the jobs of these rows (id, queue, priority, run_at, due)."""
        return await self.dispatch_quietly([_dispatch(r) for r in rows])

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


class JobService:
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
        self.submitter = Submitter(store, broker, registry, settings, self.metrics)

    # --- submit ----------------------------------------------------------------------

    def complete_defaults(self, new: NewJob) -> NewJob:
        return self.submitter.complete_defaults(new)

    async def submit(self, new: NewJob) -> Submitted:
        return await self.submitter.submit(new)

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

    async def stats(self) -> dict[str, Any]:
        counts = await self.store.counts_by_status()
        oldest = await self.store.oldest_queued_by_queue()
        queues = sorted({r["queue"] for r in counts} | set(self.settings.queue_list))
        stats: dict[str, Any] = {
            q: {
                "counts": {s.value: 0 for s in JobStatus},
                "oldest_queued_age_seconds": round(oldest.get(q, 0.0), 3),
            }
            for q in queues
        }
        for r in counts:
            stats[r["queue"]]["counts"][r["status"]] = int(r["n"])
        live: int | None = None
        try:
            for q, (ready, delayed) in (await self.broker.backlog(queues)).items():
                stats[q]["ready"] = ready
                stats[q]["delayed"] = delayed
            live = await self.broker.live_workers()
        except BrokerUnavailableError:
            for q in queues:
                stats[q]["ready"] = stats[q]["delayed"] = None
        return {"queues": stats, "live_workers": live}

    async def health(self) -> dict[str, Any]:
        """A ping of each dependency: no query that costs the database anything, and no
        error text (it is logged), since anyone may call it."""
        deps: dict[str, str] = {}
        for name, dep in (("postgres", self.store), ("redis", self.broker)):
            try:
                await dep.ping()
                deps[name] = "ok"
            except Exception:
                log.warning("health: %s is down", name, exc_info=True)
                deps[name] = "down"
        ok = all(v == "ok" for v in deps.values())
        return {"status": "ok" if ok else "degraded", "dependencies": deps}

    # --- operator actions ----------------------------------------------------------------

    async def cancel(self, job_id: str) -> JobStatus:
        """Cancel a queued job now, or flag a running one (it stops at its next heartbeat)."""
        row = await self.store.cancel(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value} and cannot be cancelled", status=job.status
            )
        return JobStatus(row["status"])

    async def replay(self, job_id: str) -> Job:
        row = await self.store.replay(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value}; only dead jobs can be replayed",
                status=job.status,
            )
        await self.submitter.enqueue_quietly([row])
        return await self.get(job_id)

    async def replay_dead(
        self, *, queue: str | None = None, task: str | None = None, limit: int = 100
    ) -> list[str]:
        rows = await self.store.replay_dead(queue=queue, task=task, limit=limit)
        await self.submitter.enqueue_quietly(rows)
        return [str(r["id"]) for r in rows]

    async def purge(self, job_id: str) -> None:
        if not await self.store.purge_dead(job_id):
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
            await self.submitter.enqueue_quietly(await self.store.unclaimed(missed))
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
            await self.submitter.enqueue_quietly([{**row, "due": delay <= 0}])
        elif status is JobStatus.DEAD:
            self.metrics.add_metric("JobsDeadLettered", "Count", 1)
        return FailOutcome(status, delay if status is JobStatus.QUEUED else 0.0)

    # --- recovery ------------------------------------------------------------------------

    async def recover(self) -> RecoveryReport:
        """Stale leases → queued/dead; every queued row → (re-)enqueued, idempotently."""
        s = self.settings
        report = RecoveryReport()
        for _ in range(s.recovery_max_batches):
            rows = await self.store.recover_stale_leases(
                s.lease_timeout_seconds, s.recovery_batch_size
            )
            for r in rows:
                if r["status"] == "dead":
                    report.dead.append(str(r["id"]))
                elif r["status"] == "queued":  # 'cancelled' ones were asked to stop: done
                    report.requeued.append(str(r["id"]))
            if len(rows) < s.recovery_batch_size:
                break
        if report.dead:
            self.metrics.add_metric("JobsDeadLettered", "Count", len(report.dead))
        # The scan resumes where the last run stopped, so a backlog larger than one run's
        # cap is still covered in full (a lost position just restarts it from the start).
        try:
            after = decode_cursor(await self.broker.scan_position())
        except InvalidCursorError:
            after = None
        for _ in range(s.recovery_max_batches):
            rows = await self.store.scan_queued(after, s.recovery_batch_size)
            if rows:
                await self.broker.enqueue([_dispatch(r) for r in rows], register=True)
                report.reenqueued += sum(1 for r in rows if r["due"])
                report.restored_delayed += sum(1 for r in rows if not r["due"])
            if len(rows) < s.recovery_batch_size:
                after = None  # reached the end: the next run starts over
                break
            after = (rows[-1]["run_at"], str(rows[-1]["id"]))
        await self.broker.save_scan_position(encode_cursor(*after) if after else None)
        await self.broker.promote_due(
            sorted(set(await self.broker.known_queues()) | set(s.queue_list))
        )
        return report

    async def gauges(self) -> dict[str, float]:
        row = await self.store.gauges()
        return {
            "DLQDepth": float(row["dead"]),
            "QueueDepth": float(row["queued"]),
            "OldestQueuedAgeSeconds": float(row["oldest_age"]),
        }

    async def backlog(self) -> int:
        return await ready_backlog(self.broker, self.settings.queue_list)


async def ready_backlog(broker: JobBroker, declared: Sequence[str]) -> int:
    """Jobs ready to run now across every queue (Redis only: no database round trip)."""
    queues = sorted(set(await broker.known_queues()) | set(declared))
    return sum(ready for ready, _ in (await broker.backlog(queues)).values())


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
