"""The gauges recovery publishes (DLQ depth, queue depth, oldest queued age, jobs submitted
in the last whole minute, the outbox's backlog and its oldest event's age), and its idle
note: while nothing was enqueued and no periodic slot came due, a run reads the gauges from
Redis and skips PostgreSQL. A part of
:class:`asyncz.service.JobService`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from asyncz.jobs import JobStatus
from asyncz.ports import JobBroker, JobStore
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry


class Gauges:
    def __init__(
        self, store: JobStore, broker: JobBroker, registry: TaskRegistry, settings: Settings
    ) -> None:
        self.store = store
        self.broker = broker
        self.registry = registry
        self.settings = settings

    async def gauges(self) -> dict[str, float]:
        row = await self.store.gauges()
        outbox = await self.store.outbox.gauges()  # lifecycle events not published yet
        return {
            "OutboxBacklog": float(outbox["backlog"]),
            "OutboxOldestAgeSeconds": float(outbox["oldest_age"]),
            "DLQDepth": float(row["dead"]),
            "QueueDepth": float(row["queued"]),
            "OldestQueuedAgeSeconds": float(row["oldest_age"]),
            # counted here once a minute, not by the api per request (an EMF line of ~200
            # bytes per single submit: docs/cost.md)
            "JobsSubmitted": float(row["submitted"]),
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
        """After a clean run: note Postgres as idle (no live job: waiting, queued, processing
        or suspended) as of ``activity``, read before the run looked at Postgres, with each
        schedule's latest slot. A job enqueued since then changes the count and a slot
        coming due is seen from the note, so the note never hides either; it expires after
        the check period, which bounds how long a job whose Redis write failed at submit
        waits."""
        if not self.settings.recovery_idle_check_seconds:
            return False
        if gauges.get("OutboxBacklog"):  # its age must go on growing in the gauges
            return False
        # a suspended job's wake may need a sweep (its id lost from Redis): never skip one
        for status in (JobStatus.PROCESSING, JobStatus.SUSPENDED):
            if await self.store.list_jobs(
                status=status.value, queue=None, task=None, limit=1, after=None
            ):
                return False
        if await self.store.maintenance.scan_queued(None, 1):
            return False
        # a waiting job is released by a parent's end, or by this sweep: never skip it
        if await self.store.dependencies.any_waiting():
            return False
        scheduled = [spec.name for spec in self.registry.scheduled()]
        last = await self.store.maintenance.last_periodic_runs(scheduled) if scheduled else {}
        periodic = {task: row["slot"].isoformat() for task, row in last.items()}
        note = json.dumps({"activity": activity, "gauges": gauges, "periodic": periodic})
        await self.broker.set_idle_mark(note, self.settings.recovery_idle_check_seconds)
        return True
