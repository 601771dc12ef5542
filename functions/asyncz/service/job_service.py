"""The job service: what every handler calls. It reads jobs and runs operator actions
itself, and holds one part per concern, each built from the store, broker and settings:
submitting (:mod:`asyncz.service.submitting`), the worker's leases
(:mod:`asyncz.service.leases`), job dependencies (:mod:`asyncz.service.dependencies`), and
maintenance (:mod:`asyncz.maintenance`: recovery,
retention, periodic jobs, gauges, stats). Its other methods delegate to them.

Depends only on the store and broker interfaces (:mod:`asyncz.ports`) and on the pure
domain; it never imports a driver, boto3, FastAPI or Powertools.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from asyncz.errors import (
    BrokerUnavailableError,
    InvalidTransitionError,
    JobNotFoundError,
    OutcomeUnknownError,
    StoreOutcomeUnknownError,
)
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob, RecoveryReport
from asyncz.maintenance.activity import Activity
from asyncz.maintenance.gauges import Gauges
from asyncz.maintenance.periodic import Periodic
from asyncz.maintenance.recovery import Recovery, run_step
from asyncz.maintenance.retention import Retention
from asyncz.maintenance.stats import SERIES_MINUTES, Stats
from asyncz.pagination import decode_cursor, encode_cursor, fit_page
from asyncz.port_types import BatchItem, FailOutcome, HeartbeatOutcome, Page, Row, SubmitOutcome
from asyncz.ports import JobBroker, JobStore, MetricsSink, NullMetrics
from asyncz.service.access import Access
from asyncz.service.callbacks import Callbacks
from asyncz.service.dependencies import Dependencies
from asyncz.service.enqueue import Enqueuer
from asyncz.service.events import Events
from asyncz.service.leases import Leases
from asyncz.service.limits import Limits
from asyncz.service.spawns import Spawns
from asyncz.service.submitting import Submitting
from asyncz.service.waits import Waits
from asyncz.service.webhooks import Webhooks
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry
from asyncz.webhooks.cipher import SecretCipher


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
        cipher: SecretCipher | None = None,
    ) -> None:
        self.store = store
        self.broker = broker
        self.registry = registry
        self.settings = settings
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.enqueuer = Enqueuer(broker)
        self.dependencies = Dependencies(store, self.enqueuer, settings, self.metrics)
        self.submitting = Submitting(store, self.enqueuer, registry, settings, self.metrics)
        self.spawns = Spawns(store, self.enqueuer, self.submitting, settings)
        self.limits = Limits(store, broker, registry, settings)
        self.leases = Leases(
            store, broker, self.enqueuer, self.dependencies, settings, self.metrics, rand,
            self.limits,
        )  # fmt: skip
        self.recovery = Recovery(store, broker, settings, self.metrics, self.dependencies)
        self.retention = Retention(store, settings, self.metrics)
        self.periodic = Periodic(store, registry, settings, self.submitting, self.enqueuer)
        self.readings = Gauges(store, broker, registry, settings)
        self.overview = Stats(store, broker, settings)
        self.access = Access(store, settings, self.metrics)
        self.activity = Activity(store, broker)
        self.waits = Waits(store, self.enqueuer)  # durable tasks' waits resolved
        self.events = Events(store, self.waits, settings)  # POST /events
        self.callbacks = Callbacks(store, self.waits, settings.max_result_bytes)
        self.webhooks = Webhooks(store, self.access, settings, cipher,  # KMS or the local key
                                 wake=lambda: self.leases.ended())  # fmt: skip

    # --- submit (asyncz.service.submitting) ------------------------------------------------

    def complete_defaults(self, new: NewJob) -> NewJob:
        return self.submitting.complete_defaults(new)

    async def submit(self, new: NewJob) -> SubmitOutcome:
        return await self.submitting.submit(new)

    async def submit_many(self, news: Sequence[NewJob]) -> list[BatchItem]:
        return await self.submitting.submit_many(news)

    async def enqueue_quietly(self, rows: Sequence[Row]) -> bool:
        return await self.enqueuer.enqueue_quietly(rows)

    # --- the worker's side (asyncz.service.leases) ----------------------------------------

    async def claim_next(
        self,
        worker_id: str,
        queues: Sequence[str],
        max_items: int,
        wait_seconds: float,
        max_timeout: int,
    ) -> list[Lease]:
        return await self.leases.claim_next(worker_id, queues, max_items, wait_seconds, max_timeout)

    async def promote(self, queues: Sequence[str]) -> int:
        return await self.leases.promote(queues)

    async def heartbeat(self, leases: Sequence[Lease]) -> HeartbeatOutcome:
        return await self.leases.heartbeat(leases)

    async def complete(self, lease: Lease, result: Any) -> bool:
        return await self.leases.complete(lease, result)

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> set[str]:
        return await self.leases.complete_many(done)

    async def save_progress(self, reports: Sequence[tuple[Lease, float, str | None]]) -> set[str]:
        return await self.leases.save_progress(reports)

    async def fail(
        self, lease: Lease, error: str, outcome: AttemptOutcome = AttemptOutcome.FAILED,
        *, final: bool = False,
    ) -> FailOutcome | None:  # fmt: skip
        return await self.leases.fail(lease, error, outcome, final=final)

    # --- maintenance (asyncz.maintenance) -------------------------------------------------

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> JobStatus | None:
        return await self.leases.suspend(lease, delay_seconds, reason)

    async def recover(self, report: RecoveryReport | None = None) -> RecoveryReport:
        """The recovery sweep, each step alone (``report.failed`` names those that failed)."""
        report = await self.recovery.recover(report)
        await run_step(report, "pauses", self.limits.mirror_pauses(), self.metrics)
        await run_step(report, "limits", self.limits.rebuild_if_lost(), self.metrics)
        await run_step(report, "events", self.events.finish_pending(), self.metrics)
        self.leases.ended()  # the ends this sweep made (lost leases, released jobs)
        return report

    async def fold_counts(self) -> int:
        return await self.recovery.fold_counts()

    async def prune(self) -> int:
        return await self.retention.prune()

    async def run_periodic(self, now: datetime | None = None) -> list[str]:
        return await self.periodic.run_periodic(now)

    async def schedules(self, now: datetime | None = None) -> list[dict[str, Any]]:
        return await self.periodic.schedules(now)

    async def gauges(self) -> dict[str, float]:
        return await self.readings.gauges()

    async def idle_gauges(self, now: datetime | None = None) -> dict[str, float] | None:
        return await self.readings.idle_gauges(now)

    async def note_if_idle(self, activity: int, gauges: dict[str, float]) -> bool:
        return await self.readings.note_if_idle(activity, gauges)

    async def stats(self) -> dict[str, Any]:
        return await self.limits.with_usage(await self.overview.stats())

    async def series(self, minutes: int = SERIES_MINUTES) -> list[dict[str, Any]]:
        return await self.overview.series(minutes)

    async def health(self) -> dict[str, Any]:
        return await self.overview.health()

    # --- flow control (asyncz.service.limits) ---------------------------------------------

    async def pause_queue(self, queue: str, by: str | None = None) -> dict[str, Any]:
        return await self.limits.pause(queue, by)

    async def resume_queue(self, queue: str) -> dict[str, Any]:
        return await self.limits.resume(queue)

    async def queue_states(self) -> list[dict[str, Any]]:
        return await self.limits.queue_states()

    def task_listing(self) -> list[dict[str, Any]]:
        return self.limits.task_listing(self.registry)

    # --- read --------------------------------------------------------------------------

    async def get(self, job_id: str) -> Job:
        job = await self.store.get_job(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        return job

    async def graph(self, job: Job) -> dict[str, Any]:
        """Its parents (``depends_on``), children (``dependents``), spawner and spawned."""
        described = await self.dependencies.describe(
            job.id, depth=job.depth, has_dependents=job.has_dependents
        )
        return {**described, **await self.spawns.describe(job)}

    async def held_reason(self, job: Job) -> str | None:
        """Why a queued job is held back, or what a suspended one waits for (or None)."""
        if job.status is JobStatus.SUSPENDED:
            return await self.spawns.waiting_for(job) or job.suspended_for
        if job.status is not JobStatus.QUEUED:
            return None
        row = {"id": job.id, "task": job.task, "concurrency_key": job.concurrency_key,
               "queue": job.queue, "priority": job.priority}  # fmt: skip
        try:
            return await self.limits.held_reason(row)
        except BrokerUnavailableError:
            return None

    async def parents_of(self, job_id: str) -> list[Row]:
        return await self.dependencies.parents_of(job_id)

    async def attempts(self, job_id: str) -> list[Attempt]:
        await self.get(job_id)
        return await self.store.list_attempts(job_id)

    async def steps(self, job_id: str, limit: int = 100, after: int = 0) -> list[Row]:
        """One page of a durable job's steps after position ``after`` (no results)."""
        await self.get(job_id)
        return await self.store.steps.list(job_id, after, limit)

    async def list_jobs(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        submitted_by: str | None = None,
        submitted_by_key_id: str | None = None,
    ) -> Page:
        jobs = await self.store.list_jobs(
            status=status, queue=queue, task=task, limit=limit, after=decode_cursor(cursor),
            submitted_by=submitted_by, submitted_by_key_id=submitted_by_key_id,
        )  # fmt: skip
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
        """Cancel a queued, waiting or suspended job now (and its waiting descendants under
        ``fail``, page by page for at most ``cascade_seconds``: the sweep finishes what is
        left, and the job shows ``cascade_pending`` until then), or flag a running one (it
        stops at its next heartbeat)."""
        with _outcome_of("cancel", job_id):
            row = await self.store.cancel(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value} and cannot be cancelled", status=job.status
            )
        if row["status"] == JobStatus.CANCELLED.value and row["has_dependents"]:
            # within the call's bound; what is left is the sweep's (cascade_pending)
            await self.dependencies.settle_ids([str(row["id"])], flagged=True)
        self.leases.ended()
        return JobStatus(row["status"])

    async def replay(self, job_id: str, *, reset_steps: bool = False) -> Job:
        """A dead job runs again; ``reset_steps``: a durable task's stored steps go first
        (its fixed code starts over)."""
        with _outcome_of("replay", job_id):
            if reset_steps:
                await self.store.steps.reset(job_id)
            row = await self.store.replay(job_id)
        if row is None:
            job = await self.get(job_id)
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value}; only dead jobs can be replayed",
                status=job.status,
            )
        await self.dependencies.after_replay([row])
        self.leases.ended()
        return await self.get(job_id)

    async def replay_dead(
        self, *, queue: str | None = None, task: str | None = None, limit: int = 100
    ) -> list[str]:
        with _outcome_of("bulk replay", None):
            rows = await self.store.replay_dead(queue=queue, task=task, limit=limit)
        await self.dependencies.after_replay(rows)
        self.leases.ended()
        return [str(r["id"]) for r in rows]

    async def purge(self, job_id: str) -> None:
        with _outcome_of("purge", job_id):
            purged = await self.store.purge_dead(job_id)
        if not purged:
            job = await self.get(job_id)
            if job.status is JobStatus.DEAD:
                raise InvalidTransitionError(
                    f"job {job_id} is dead but unfinished jobs depend on it: replay it, or "
                    "cancel them first",
                    status=job.status,
                )
            raise InvalidTransitionError(
                f"job {job_id} is {job.status.value}; only dead jobs can be purged",
                status=job.status,
            )


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
