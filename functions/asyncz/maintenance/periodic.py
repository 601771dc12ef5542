"""Periodic jobs: the scheduler run (each due slot of each scheduled task enqueued once)
and what ``GET /schedules`` shows. A part of :class:`asyncz.service.JobService`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from asyncz.jobs import NewJob
from asyncz.port_types import Dispatch
from asyncz.ports import JobStore
from asyncz.service.enqueue import Enqueuer
from asyncz.service.submitting import Submitting
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry


class Periodic:
    def __init__(
        self,
        store: JobStore,
        registry: TaskRegistry,
        settings: Settings,
        submitting: Submitting,
        enqueuer: Enqueuer,
    ) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.submitting = submitting  # a slot's job gets the defaults a submit gets
        self.enqueuer = enqueuer

    async def run_periodic(self, now: datetime | None = None) -> list[str]:
        """Enqueue every due slot of every scheduled task; returns the new jobs' ids.

        Safe to run twice at once or again after a crash: a slot that has its job already
        is refused by the database (``periodic_runs``' primary key), and nothing else is
        written for it. A schedule seen for the first time starts at its next slot.
        """
        now = now or datetime.now(UTC)
        specs = self.registry.scheduled()
        if not specs:
            return []
        last = await self.store.maintenance.last_periodic_runs([spec.name for spec in specs])
        queue = self.settings.queue_list[0]
        started: list[str] = []
        for spec in specs:
            plan = spec.schedule
            assert plan is not None
            if spec.name not in last:
                await self.store.maintenance.mark_periodic_seen(spec.name, plan.latest_slot(now))
                continue
            for slot in plan.due_slots(last[spec.name]["slot"], now):
                new = self.submitting.complete_defaults(
                    NewJob(task=spec.name, payload={"scheduled_for": slot.isoformat()}, queue=queue)
                )
                job_id = str(uuid.uuid4())
                row = await self.store.maintenance.insert_periodic_job(job_id, slot, new)
                if row is None:
                    continue  # another scheduler enqueued this slot
                started.append(job_id)
                await self.enqueuer.dispatch_quietly(
                    [Dispatch(job_id, new.queue, new.priority, row["run_at_ms"], True)]
                )
        return started

    async def schedules(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """Each scheduled task with its schedule, last run and next run."""
        now = now or datetime.now(UTC)
        specs = self.registry.scheduled()
        last = (
            await self.store.maintenance.last_periodic_runs([s.name for s in specs])
            if specs
            else {}
        )
        out: list[dict[str, Any]] = []
        for spec in specs:
            plan = spec.schedule
            assert plan is not None
            seen = last.get(spec.name)
            due = plan.due_slots(seen["slot"], now)[:1] if seen else []
            out.append(
                {
                    "task": spec.name,
                    "schedule": plan.describe(),
                    "timezone": plan.timezone,
                    "catch_up": plan.catch_up,
                    "last_run": seen["slot"] if seen and seen["job_id"] else None,
                    "last_job_id": seen["job_id"] if seen else None,
                    "next_run": due[0] if due else plan.next_slot(now),
                }
            )
        return out
