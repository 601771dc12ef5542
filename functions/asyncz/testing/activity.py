"""The in-memory store's activity queries: its ``activity`` part
(:class:`asyncz.ports.ActivityStore`) on the store's dicts."""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asyncz.jobs import JobStatus
from asyncz.port_types import Row
from asyncz.testing.maintenance import now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables

FAILED = ("failed", "timed_out", "lost")


def percentile(values: list[float], p: float) -> float | None:
    """PostgreSQL's percentile_cont: linear between the two nearest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    return float(statistics.quantiles(ordered, n=100, method="inclusive")[round(p * 100) - 1])


class MemoryActivity:
    def __init__(self, store: StoreTables) -> None:
        self.store = store

    async def task_figures(self, minutes: int) -> list[Row]:
        since = now_utc() - timedelta(minutes=minutes)
        groups: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(
            list
        )
        for job_id, attempts in self.store.attempts.items():
            job = self.store.jobs[job_id]
            for a in attempts:
                if a["finished_at"] is not None and a["finished_at"] >= since:
                    groups[(job["task"], job["queue"])].append((job, a))
        rows: list[Row] = []
        for (task, queue), pairs in sorted(groups.items()):
            runs = [float(a["duration_ms"]) for _, a in pairs if a["duration_ms"] is not None]
            waits = [
                (a["started_at"] - j["run_at"]).total_seconds() * 1000
                for j, a in pairs
                if a["attempt"] == j["attempts"] and j["run_at"] <= a["started_at"]
            ]
            rows.append({
                "task": task, "queue": queue, "runs": len(pairs),
                "completed": sum(a["outcome"] == "completed" for _, a in pairs),
                "failures": sum(a["outcome"] in FAILED for _, a in pairs),
                "retries": sum(a["attempt"] > 1 for _, a in pairs),
                "run_p50_ms": percentile(runs, 0.5), "run_p95_ms": percentile(runs, 0.95),
                "wait_p50_ms": percentile(waits, 0.5), "wait_p95_ms": percentile(waits, 0.95),
            })  # fmt: skip
        return rows

    async def running_jobs(self, limit: int) -> list[Row]:
        now = now_utc()
        running = [
            j for j in self.store.jobs.values()
            if j["status"] == JobStatus.PROCESSING and j["heartbeat_at"] is not None
        ]  # fmt: skip
        running.sort(key=lambda j: j["started_at"])
        return [
            {"job_id": j["id"], "task": j["task"], "queue": j["queue"],
             "worker_id": j["worker_id"], "attempt": j["attempts"], "started_at": j["started_at"],
             "elapsed_seconds": (now - j["started_at"]).total_seconds(),
             "progress": j["progress"], "progress_message": j["progress_message"],
             "heartbeat_at": j["heartbeat_at"]}
            for j in running[:limit]
        ]  # fmt: skip
