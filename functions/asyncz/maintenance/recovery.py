"""Recovery's sweep: a lease whose worker died goes back to its queue (or to the DLQ when
out of retries), every queued row's id is put in Redis again, idempotently, so a job
whose enqueue was lost still runs, and every waiting job whose parents have ended is
released (or ended by its rule). Also folds finished jobs into the per-queue counts.
A part of :class:`asyncz.service.JobService`."""

from __future__ import annotations

from asyncz.errors import InvalidCursorError
from asyncz.jobs import RecoveryReport
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.ports import JobBroker, JobStore, MetricsSink
from asyncz.service.dependencies import Dependencies
from asyncz.service.enqueue import dispatch_of
from asyncz.settings import Settings

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

    async def recover(self) -> RecoveryReport:
        """Stale leases → queued/dead; waiting jobs whose parents ended → released (or
        ended); every queued row → (re-)enqueued, idempotently."""
        s = self.settings
        report = RecoveryReport()
        for _ in range(s.recovery_max_batches):
            rows = await self.store.maintenance.recover_stale_leases(
                s.lease_timeout_seconds, s.recovery_batch_size
            )
            for r in rows:
                if r["status"] == "dead":
                    report.dead.append(str(r["id"]))
                elif r["status"] == "queued":  # 'cancelled' ones were asked to stop: done
                    report.requeued.append(str(r["id"]))
            await self.dependencies.settle([r for r in rows if r["status"] != "queued"])
            if len(rows) < s.recovery_batch_size:
                break
        if report.dead:
            self.metrics.add_metric("JobsDeadLettered", "Count", len(report.dead))
        for _ in range(s.recovery_max_batches):
            changed = await self.dependencies.sweep(s.recovery_batch_size)
            report.released += changed
            if changed < s.recovery_batch_size:
                break
        # The scan resumes where the last run stopped, so a backlog larger than one run's
        # cap is still covered in full (a lost position just restarts it from the start).
        try:
            after = decode_cursor(await self.broker.scan_position())
        except InvalidCursorError:
            after = None
        for _ in range(s.recovery_max_batches):
            rows = await self.store.maintenance.scan_queued(after, s.recovery_batch_size)
            if rows:
                await self.broker.enqueue([dispatch_of(r) for r in rows], register=True)
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

    async def fold_counts(self) -> int:
        """Fold the jobs finished since the last run into GET /stats' per-queue counts (so
        it never counts history); returns how many."""
        return await self.store.maintenance.fold_finished_counts(FOLD_LAG_SECONDS)
