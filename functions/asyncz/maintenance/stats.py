"""What an operator looks at: per-queue counts and backlog, finished attempts per minute,
dependency health. A part of :class:`asyncz.service.JobService`."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.errors import BrokerUnavailableError
from asyncz.jobs import JobStatus
from asyncz.maintenance.cost import CostEstimate
from asyncz.ports import JobBroker, JobStore
from asyncz.settings import Settings

log = logging.getLogger("asyncz.service")
SERIES_MINUTES = 60


class Stats:
    def __init__(self, store: JobStore, broker: JobBroker, settings: Settings) -> None:
        self.store = store
        self.broker = broker
        self.settings = settings
        self.cost = CostEstimate(
            store,
            front=settings.api_front,
            concurrency=settings.worker_concurrency,
            cache_seconds=settings.cost_cache_seconds,
        )

    async def stats(self) -> dict[str, Any]:
        counts = await self.store.counts_by_status()
        queued = sorted({r["queue"] for r in counts if r["status"] == "queued" and r["n"] > 0})
        oldest = await self.store.oldest_queued_by_queue(queued)
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
        return {"queues": stats, "live_workers": live, "cost": await self.cost.estimate()}

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
