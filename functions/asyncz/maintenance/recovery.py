"""Recovery's sweep: a lease whose worker died goes back to its queue (or to the DLQ when
out of retries), every queued row's id is put in Redis again, idempotently, so a job
whose enqueue was lost still runs, and every waiting job whose parents have ended is
released (or ended by its rule), and every waiting gather counts the jobs of its that have
ended. Also folds finished jobs into the per-queue counts.
A part of :class:`asyncz.service.JobService`."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from asyncz.errors import InvalidCursorError
from asyncz.jobs import RecoveryReport
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.port_types import Row
from asyncz.ports import JobBroker, JobStore, MetricsSink
from asyncz.service.dependencies import Dependencies
from asyncz.service.enqueue import dispatch_of
from asyncz.settings import Settings

log = logging.getLogger("asyncz.recovery")
T = TypeVar("T")
NO_JOB = "00000000-0000-0000-0000-000000000000"  # before every job id: a walk's start


async def run_step(
    report: RecoveryReport, name: str, step: Awaitable[T], metrics: MetricsSink
) -> T | None:
    """One step of the sweep, alone: a failure is logged, named in ``report.failed`` and
    counted (RecoveryStepFailed), and the caller goes on with the next step."""
    try:
        return await step
    except Exception as exc:  # noqa: BLE001 - any failure of one step must not stop the rest
        log.error("recovery step %s failed: %s: %s", name, type(exc).__name__, exc)
        report.failed.append(name)
        metrics.add_metric("RecoveryStepFailed", "Count", 1)
        return None


# A fold counts jobs that finished at least this long ago: longer than any statement that
# sets finished_at can take to commit (the server's statement timeout is 5 s by default).
FOLD_LAG_SECONDS = 10.0


class Recovery:
    def __init__(
        self,
        store: JobStore,
        broker: JobBroker,
        settings: Settings,
        metrics: MetricsSink,
        dependencies: Dependencies,
    ) -> None:
        self.store = store
        self.broker = broker
        self.settings = settings
        self.metrics = metrics
        self.dependencies = dependencies

    async def recover(self, report: RecoveryReport | None = None) -> RecoveryReport:
        """Stale leases → queued/dead; flagged cascades resumed; waiting jobs whose parents
        ended → released (or ended); waiting gathers count their ended jobs; every queued
        row, and every suspended one whose wake has come → (re-)enqueued, idempotently. Each
        step fails alone (see :func:`run_step`): the others still run."""
        report = report or RecoveryReport()
        await run_step(report, "leases", self._stale_leases(report), self.metrics)
        await run_step(report, "cascades", self._cascades(), self.metrics)
        await run_step(report, "waiting", self._waiting(report), self.metrics)
        await run_step(report, "reenqueue", self._reenqueue(report), self.metrics)
        await run_step(report, "gathers", self._gathers(report), self.metrics)
        await run_step(report, "suspended", self._due_suspended(report), self.metrics)
        await run_step(report, "promote", self._promote(), self.metrics)
        return report

    async def _stale_leases(self, report: RecoveryReport) -> None:
        s = self.settings
        for _ in range(s.recovery_max_batches):
            rows = await self.store.maintenance.recover_stale_leases(
                s.lease_timeout_seconds, s.recovery_batch_size
            )
            dead = [str(r["id"]) for r in rows if r["status"] == "dead"]
            report.dead.extend(dead)
            # 'cancelled' ones were asked to stop: done
            report.requeued.extend(str(r["id"]) for r in rows if r["status"] == "queued")
            if dead:
                self.metrics.add_metric("JobsDeadLettered", "Count", len(dead))
            await self.dependencies.settle([r for r in rows if r["status"] != "queued"])
            if len(rows) < s.recovery_batch_size:
                break

    async def _cascades(self) -> None:
        """Cascades left flagged (a crash between pages, a call out of time), for at most
        recovery_cascade_seconds."""
        s = self.settings
        deadline = time.monotonic() + s.recovery_cascade_seconds
        while (left := deadline - time.monotonic()) > 0:
            if await self.dependencies.resume(s.recovery_batch_size, left) < s.recovery_batch_size:
                break

    async def _waiting(self, report: RecoveryReport) -> None:
        """A bounded walk over waiting jobs that resumes where the last run stopped."""
        s = self.settings
        after = await self._position("waiting")
        for _ in range(s.recovery_max_batches):
            page = await self.dependencies.sweep(after, s.recovery_batch_size)
            report.released += page.changed
            after = page.after
            if after is None:
                break
        await self._save_position(after, "waiting")

    async def _reenqueue(self, report: RecoveryReport) -> None:
        """Queued jobs Redis lost (a flush, a failed enqueue), enqueued again."""

        def count(rows: list[Row]) -> None:
            report.reenqueued += sum(1 for r in rows if r["due"])
            report.restored_delayed += sum(1 for r in rows if not r["due"])

        await self._walk("queued", self.store.maintenance.scan_queued, count)

    async def _due_suspended(self, report: RecoveryReport) -> None:
        """Suspended jobs whose wake has come, enqueued again: a wake Redis lost still comes."""

        def count(rows: list[Row]) -> None:
            report.reenqueued += len(rows)

        await self._walk("suspended", self.store.maintenance.scan_due_suspended, count)

    async def _walk(self, scan: str, fetch: Callable[[tuple[datetime, str] | None, int],
                    Awaitable[list[Row]]], count: Callable[[list[Row]], None]) -> None:  # fmt: skip
        """Enqueue (idempotently) the rows ``fetch`` finds, a page at a time, each page
        ``count``ed as it goes. The walk resumes where the last run stopped, so a backlog
        larger than one run's cap is still covered in full (a lost position restarts it)."""
        s = self.settings
        after = await self._position(scan)
        for _ in range(s.recovery_max_batches):
            rows = await fetch(after, s.recovery_batch_size)
            if rows:
                await self.broker.enqueue([dispatch_of(r) for r in rows], register=True)
                count(rows)
            if len(rows) < s.recovery_batch_size:
                after = None  # reached the end: the next run starts over
                break
            after = (rows[-1]["run_at"], str(rows[-1]["id"]))
        await self._save_position(after, scan)

    async def _gathers(self, report: RecoveryReport) -> None:
        """Waiting gathers count every job of theirs that has ended: an end whose count a
        crash cut off (between the end's commit and its cascade) is counted here, and the
        gather it completes wakes its job. Bounded: at most max_batches pages a run."""
        s, after = self.settings, NO_JOB
        for _ in range(s.recovery_max_batches):
            page = await self.store.spawns.waiting_gatherers(after, s.recovery_batch_size)
            for gatherer in page:
                woken = await self.store.spawns.settle(gatherer, None)
                if woken:
                    await self.broker.enqueue([dispatch_of(r) for r in woken], register=True)
                    report.released += len(woken)
            if len(page) < s.recovery_batch_size:
                break
            after = page[-1]

    async def _position(self, scan: str) -> tuple[datetime, str] | None:
        """Where a walk stopped last run (a lost or garbled position restarts it)."""
        try:
            return decode_cursor(await self.broker.scan_position(scan))
        except InvalidCursorError:
            return None

    async def _save_position(self, after: tuple[datetime, str] | None, scan: str) -> None:
        await self.broker.save_scan_position(encode_cursor(*after) if after else None, scan)

    async def _promote(self) -> None:
        known = set(await self.broker.known_queues()) | set(self.settings.queue_list)
        await self.broker.promote_due(sorted(known))

    async def fold_counts(self) -> int:
        """Fold the jobs finished since the last run into GET /stats' per-queue counts (so
        it never counts history); returns how many."""
        return await self.store.maintenance.fold_finished_counts(FOLD_LAG_SECONDS)
