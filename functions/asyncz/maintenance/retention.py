"""Retention: finished and dead jobs, the audit trail, events and unpublished lifecycle
events go after the periods the settings give. A part of
:class:`asyncz.service.JobService`."""

from __future__ import annotations

import time

from asyncz.ports import JobStore, MetricsSink
from asyncz.settings import Settings


class Retention:
    def __init__(self, store: JobStore, settings: Settings, metrics: MetricsSink) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics

    async def prune(self) -> int:
        """Retention: delete finished jobs (and their attempts) older than the settings say,
        in batches, until none is left or ``retention_seconds_per_run`` has passed for each
        kind; returns how many went. A cap on batches instead would cap the rate a deployment
        can sustain (20 batches of 500 a minute: 167 jobs/s)."""
        s = self.settings
        pruned = 0
        for kind, older_than, prune in (
            ("finished", s.retain_finished_seconds, self.store.maintenance.prune_finished),
            ("dead", s.retain_dead_seconds, self.store.maintenance.prune_dead),
        ):
            if older_than <= 0:  # 0 keeps forever
                continue
            ends = time.monotonic() + s.retention_seconds_per_run
            while True:
                # the next batch's durable steps first, a page at a time: the jobs' delete
                # then cascades to none, and no statement grows with a job's steps
                page = s.cascade_page_size
                while (
                    await self.store.steps.prune(kind, older_than, s.recovery_batch_size, page)
                    == page
                    and time.monotonic() < ends
                ):
                    pass
                n = await prune(older_than, s.recovery_batch_size)
                pruned += n
                if n < s.recovery_batch_size or time.monotonic() >= ends:
                    break
        if s.retain_finished_seconds > 0:
            await self.store.maintenance.prune_periodic_runs(s.retain_finished_seconds)
        if s.retain_audit_seconds > 0:
            await self.store.access.prune_audit(s.retain_audit_seconds, s.recovery_batch_size)
        if s.retain_events_seconds > 0:  # a page at a time, within the run's bound
            ends = time.monotonic() + s.retention_seconds_per_run
            while (
                await self.store.events.prune(s.retain_events_seconds, s.recovery_batch_size)
                == s.recovery_batch_size
                and time.monotonic() < ends
            ):
                pass
        if s.retain_outbox_seconds > 0:  # events nothing published in time (a dead sink)
            ends = time.monotonic() + s.retention_seconds_per_run
            expired = 0
            while True:
                n = await self.store.outbox.prune(s.retain_outbox_seconds, s.recovery_batch_size)
                expired += n
                if n < s.recovery_batch_size or time.monotonic() >= ends:
                    break
            if expired:
                self.metrics.add_metric("EventsExpired", "Count", expired)
        if s.retain_webhook_deliveries_seconds > 0:  # a page at a time, within the bound
            ends = time.monotonic() + s.retention_seconds_per_run
            while (
                await self.store.webhooks.prune(
                    s.retain_webhook_deliveries_seconds, s.recovery_batch_size
                )
                == s.recovery_batch_size
                and time.monotonic() < ends
            ):
                pass
        if pruned:
            self.metrics.add_metric("JobsPruned", "Count", pruned)
        return pruned
