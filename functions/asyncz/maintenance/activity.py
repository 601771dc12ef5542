"""What the system is doing: the live workers with what each runs now, and each task's
figures over the last hour. A part of :class:`asyncz.service.JobService`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from asyncz.errors import BrokerUnavailableError
from asyncz.ports import JobBroker, JobStore

FIGURES_MINUTES = 60
RUNNING_LIMIT = 1000  # the workers view lists at most this many running attempts


def _ms_time(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


class Activity:
    def __init__(self, store: JobStore, broker: JobBroker) -> None:
        self.store = store
        self.broker = broker

    async def task_figures(self, minutes: int = FIGURES_MINUTES) -> list[dict[str, Any]]:
        rows = await self.store.activity.task_figures(minutes)
        return [
            {**r, **{k: round(float(r[k]), 1) if r[k] is not None else None
                     for k in ("run_p50_ms", "run_p95_ms", "wait_p50_ms", "wait_p95_ms")}}
            for r in rows
        ]  # fmt: skip

    async def workers(self) -> dict[str, Any]:
        """Each live worker (from its presence in Redis) with the attempts it runs (from
        PostgreSQL); an attempt whose worker has no presence (Redis flushed, or the worker
        died and recovery has not reclaimed it yet) is listed under ``unknown_workers``."""
        running = await self.store.activity.running_jobs(RUNNING_LIMIT)
        try:
            live = await self.broker.live_worker_list()
        except BrokerUnavailableError:
            live = None
        by_worker: dict[str, list[dict[str, Any]]] = {}
        for r in running:
            job = {k: r[k] for k in ("job_id", "task", "queue", "attempt", "started_at",
                                     "progress", "progress_message")}  # fmt: skip
            job["elapsed_seconds"] = round(float(r["elapsed_seconds"]), 3)
            by_worker.setdefault(str(r["worker_id"]), []).append(job)
        workers = [
            {"worker_id": w["worker_id"], "since": _ms_time(w["since_ms"]),
             "presence_until": _ms_time(w["expires_ms"]),
             "running": by_worker.pop(w["worker_id"], [])}
            for w in (live or [])
        ]  # fmt: skip
        return {
            "workers": workers,
            "unknown_workers": [{"worker_id": w, "running": jobs} for w, jobs in by_worker.items()],
            "presence_available": live is not None,
        }
