"""What the job service does on a schedule or for an operator's look, apart from the
request path: the recovery sweep, the gauges, the backlog, stats and health. A base class of
:class:`asyncz.service.JobService` (one service object, two rooms)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.errors import BrokerUnavailableError, InvalidCursorError
from asyncz.jobs import JobStatus, RecoveryReport
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.ports import Dispatch, JobBroker, JobStore, MetricsSink, Row, epoch_ms
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")
SERIES_MINUTES = 60
# A fold counts jobs that finished at least this long ago: longer than any statement that
# sets finished_at can take to commit (the server's statement timeout is 5 s by default).
FOLD_LAG_SECONDS = 10.0


def dispatch_of(row: Row) -> Dispatch:
    """Where a row's id belongs in Redis (ready when due, else delayed)."""
    return Dispatch(
        job_id=str(row["id"]),
        queue=row["queue"],
        priority=row["priority"],
        run_at_ms=epoch_ms(row["run_at"]),
        due=bool(row.get("due", True)),
    )


class Sweeps:
    store: JobStore
    broker: JobBroker
    settings: Settings
    registry: TaskRegistry
    metrics: MetricsSink

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

    async def series(self, minutes: int = SERIES_MINUTES) -> list[dict[str, Any]]:
        """Completed and failed attempts and dead jobs per minute, oldest first, one entry
        for every minute of the window (zeros where nothing finished)."""
        rows = {r["minute"]: r for r in await self.store.finished_per_minute(minutes)}
        # the window ends at the store's current minute (Postgres' now(), not this clock)
        last = max(rows, default=None) or datetime.now(UTC).replace(second=0, microsecond=0)
        last = max(last, datetime.now(UTC).replace(second=0, microsecond=0)).astimezone(UTC)
        out = []
        for back in range(minutes - 1, -1, -1):
            minute = last - timedelta(minutes=back)
            r = rows.get(minute, {})
            out.append(
                {"minute": minute.isoformat().replace("+00:00", "Z")}
                | {k: int(r.get(k, 0)) for k in ("completed", "failed", "dead")}
            )
        return out

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

    async def prune(self) -> int:
        """Retention: delete finished jobs (and their attempts) older than the settings say,
        in bounded batches; returns how many went."""
        s = self.settings
        pruned = 0
        for older_than, prune in (
            (s.retain_finished_seconds, self.store.prune_finished),
            (s.retain_dead_seconds, self.store.prune_dead),
        ):
            if older_than <= 0:  # 0 keeps forever
                continue
            for _ in range(s.recovery_max_batches):
                n = await prune(older_than, s.recovery_batch_size)
                pruned += n
                if n < s.recovery_batch_size:
                    break
        if s.retain_finished_seconds > 0:
            await self.store.prune_periodic_runs(s.retain_finished_seconds)
        if pruned:
            self.metrics.add_metric("JobsPruned", "Count", pruned)
        return pruned

    async def fold_counts(self) -> int:
        """Fold the jobs finished since the last run into GET /stats' per-queue counts (so
        it never counts history); returns how many."""
        return await self.store.fold_finished_counts(FOLD_LAG_SECONDS)

    async def gauges(self) -> dict[str, float]:
        row = await self.store.gauges()
        return {
            "DLQDepth": float(row["dead"]),
            "QueueDepth": float(row["queued"]),
            "OldestQueuedAgeSeconds": float(row["oldest_age"]),
        }

    async def idle_gauges(self, now: datetime | None = None) -> dict[str, float] | None:
        """The gauges noted when recovery last found Postgres idle, if nothing has been
        enqueued since and no periodic slot has come due (Redis and the registry only);
        None when recovery must look at Postgres."""
        if not self.settings.recovery_idle_check_seconds:
            return None
        mark = await self.broker.idle_mark()
        if mark is None:
            return None
        note = json.loads(mark)
        if note.get("activity") != await self.broker.activity():
            return None
        if self._slot_due(note.get("periodic"), now or datetime.now(UTC)):
            return None
        return {str(k): float(v) for k, v in note["gauges"].items()}

    def _slot_due(self, noted: Any, now: datetime) -> bool:
        """Whether a scheduled task has a slot due after the one the note saw (or was not
        in the note at all: a schedule deployed since)."""
        seen = noted if isinstance(noted, dict) else {}
        for spec in self.registry.scheduled():
            assert spec.schedule is not None
            last = seen.get(spec.name)
            if last is None or spec.schedule.due_slots(datetime.fromisoformat(last), now):
                return True
        return False

    async def note_if_idle(self, activity: int, gauges: dict[str, float]) -> bool:
        """After a clean run: note Postgres as idle (no queued or processing job) as of
        ``activity``, read before the run looked at Postgres, with each schedule's latest
        slot. A job enqueued since then changes the count and a slot coming due is seen
        from the note, so the note never hides either; it expires after the check period,
        which bounds how long a job whose Redis write failed at submit waits."""
        if not self.settings.recovery_idle_check_seconds:
            return False
        processing = await self.store.list_jobs(
            status=JobStatus.PROCESSING.value, queue=None, task=None, limit=1, after=None
        )
        if processing or await self.store.scan_queued(None, 1):
            return False
        scheduled = [spec.name for spec in self.registry.scheduled()]
        last = await self.store.last_periodic_runs(scheduled) if scheduled else {}
        periodic = {task: row["slot"].isoformat() for task, row in last.items()}
        note = json.dumps({"activity": activity, "gauges": gauges, "periodic": periodic})
        await self.broker.set_idle_mark(note, self.settings.recovery_idle_check_seconds)
        return True

    async def backlog(self) -> int:
        return await ready_backlog(self.broker, self.settings.queue_list)


async def ready_backlog(broker: JobBroker, declared: Sequence[str]) -> int:
    """Jobs ready to run now across every queue (Redis only: no database round trip)."""
    queues = sorted(set(await broker.known_queues()) | set(declared))
    return sum(ready for ready, _ in (await broker.backlog(queues)).values())
