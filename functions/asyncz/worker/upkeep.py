"""A worker's upkeep beside its attempts: lease heartbeats and progress reports."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.worker.stats import Running

log = logging.getLogger("asyncz.worker")

PROGRESS_SECONDS = 1.0  # progress reports are written at most this often per job


class Upkeep:
    """A part of :class:`asyncz.worker.loop.WorkerLoop`: reads the attempts it runs
    (``running``, shared) and rides out outages the way it does (``quietly``)."""

    def __init__(
        self,
        service: JobService,
        settings: Settings,
        worker_id: str,
        running: dict[str, Running],
        quietly: Callable[[Awaitable[Any]], Awaitable[Any]],
    ) -> None:
        self.service = service
        self.settings = settings
        self.worker_id = worker_id
        self.running = running
        self._quietly = quietly

    # --- progress reports ------------------------------------------------------------------

    async def progress_loop(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            await self.write_progress(list(self.running))

    async def write_progress(self, job_ids: list[str]) -> None:
        """Write the reports not written yet of these attempts, in one statement. Best
        effort: a report lost to an outage is replaced by the task's next one."""
        reports = [
            (r.lease, *report)
            for job_id in job_ids
            if (r := self.running.get(job_id)) and (report := r.ctx.take_progress())
        ]
        if not reports:
            return
        try:
            await self.service.save_progress(reports)
        except Exception as exc:  # noqa: BLE001 - progress must never fail an attempt
            log.warning("could not write progress: %s", exc)

    # --- heartbeats -------------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        interval = min(
            self.settings.heartbeat_seconds, self.settings.worker_presence_ttl_seconds / 3
        )
        while True:
            await asyncio.sleep(interval)
            # Leases first (Postgres): a Redis that refuses or is gone must not hold them up;
            # and nothing may end this loop but cancellation, or leases expire while the
            # attempts still run.
            try:
                await self.beat()
            except Exception:
                log.exception("heartbeat failed; trying again at the next interval")
            try:
                await self.service.broker.register_worker(
                    self.worker_id, self.settings.worker_presence_ttl_seconds
                )
            except Exception as exc:  # noqa: BLE001 - presence is best-effort
                log.warning("could not refresh worker presence: %s", exc)

    async def beat(self) -> None:
        """Renew every held lease (and the slots of abandoned threads); stop attempts whose
        lease is gone or whose job is cancelled."""
        leases = [r.lease for r in self.running.values()]
        if not leases and not self.service.limits.abandoned:
            return
        outcome = await self._quietly(self.service.heartbeat(leases))
        if outcome is None:
            return
        for job_id in outcome.lost | outcome.cancel_requested:
            running = self.running.get(job_id)
            if running is None or running.task is None or running.stop_reason:
                continue
            if running.finishing:  # cancelling now would cut the fenced write in half
                continue
            running.stop_reason = "lost" if job_id in outcome.lost else "cancel"
            running.ctx.cancelled.set()
            running.task.cancel()
