"""The in-memory store's reads for listings, statistics and the dashboard: a part of
:class:`asyncz.testing.store.MemoryStore`, held to the same contract as the PostgreSQL
adapter's queries."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from asyncz.jobs import Job, JobStatus
from asyncz.port_types import Row
from asyncz.testing.maintenance import now_utc

_now = now_utc


def job_view(j: dict[str, Any]) -> Job:
    """A row as the store answers it: ``started_at`` is the job's first start (kept
    across its suspensions)."""
    row = dict(j)
    first = row.pop("first_started_at", None)
    row.pop("woken", None)  # the store's own flag (a wait resolved while the attempt ran)
    return Job(**{**row, "started_at": first or row["started_at"]})


class MemoryListings:
    """Reads over the store's rows; each the answer of one query of the real store."""

    jobs: dict[str, dict[str, Any]]
    attempts: dict[str, list[dict[str, Any]]]

    async def list_jobs(
        self,
        *,
        status: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
        submitted_by: str | None = None,
        submitted_by_key_id: str | None = None,
    ) -> list[Job]:
        rows = [
            j
            for j in self.jobs.values()
            if (status is None or j["status"] == status)
            and (submitted_by is None or j["submitted_by"] == submitted_by)
            and (submitted_by_key_id is None or j["submitted_by_key_id"] == submitted_by_key_id)
            and (queue is None or j["queue"] == queue)
            and (task is None or j["task"] == task)
            and (after is None or (j["created_at"], uuid.UUID(j["id"])) < _key(after))
        ]
        rows.sort(key=lambda j: (j["created_at"], uuid.UUID(j["id"])), reverse=True)
        return [job_view(j) for j in rows[:limit]]

    async def list_dead(
        self, *, queue: str | None, task: str | None, limit: int, after: tuple[datetime, str] | None
    ) -> list[Job]:
        rows = [
            j
            for j in self.jobs.values()
            if j["status"] == JobStatus.DEAD
            and (queue is None or j["queue"] == queue)
            and (task is None or j["task"] == task)
            and (after is None or (j["finished_at"], uuid.UUID(j["id"])) < _key(after))
        ]
        rows.sort(key=lambda j: (j["finished_at"], uuid.UUID(j["id"])), reverse=True)
        return [job_view(j) for j in rows[:limit]]

    async def counts_by_status(self) -> list[Row]:
        counts: dict[tuple[str, str], int] = {}
        for j in self.jobs.values():
            counts[j["queue"], str(j["status"])] = counts.get((j["queue"], str(j["status"])), 0) + 1
        return [{"queue": q, "status": s, "n": n} for (q, s), n in counts.items()]

    async def fold_finished_counts(self, lag_seconds: float) -> int:
        return 0  # counts_by_status counts every job each time: nothing to fold

    def _due_queued(self) -> list[dict[str, Any]]:
        now = _now()
        return [j for j in self.jobs.values() if j["status"] == "queued" and j["run_at"] <= now]

    async def oldest_queued_by_queue(self, queues: Sequence[str]) -> dict[str, float]:
        oldest: dict[str, datetime] = {}
        for j in (j for j in self._due_queued() if j["queue"] in queues):
            oldest[j["queue"]] = min(oldest.get(j["queue"], j["run_at"]), j["run_at"])
        return {q: (_now() - t).total_seconds() for q, t in oldest.items()}

    async def finished_per_minute(self, minutes: int) -> list[Row]:
        since = _now().replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)
        per: dict[datetime, dict[str, Any]] = {}

        def bump(at: datetime | None, kind: str) -> None:
            if at is not None and at >= since:
                minute = at.replace(second=0, microsecond=0)
                row = per.setdefault(minute, {"minute": minute, "completed": 0, "failed": 0,
                                              "dead": 0})  # fmt: skip
                row[kind] += 1

        for attempts in self.attempts.values():
            for a in attempts:
                failed = a["outcome"] in ("failed", "timed_out", "lost")
                if a["outcome"] == "completed" or failed:
                    bump(a["finished_at"], "failed" if failed else "completed")
        for j in self.jobs.values():
            if j["status"] == "dead":
                bump(j["finished_at"], "dead")
        return [per[m] for m in sorted(per)]

    async def gauges(self) -> Row:
        due = self._due_queued()
        oldest = min((j["run_at"] for j in due), default=None)
        minute = _now().replace(second=0, microsecond=0)
        last = minute - timedelta(minutes=1)
        return {
            "dead": await self.count_dead(),
            "queued": len(due),
            "oldest_age": (_now() - oldest).total_seconds() if oldest else 0.0,
            "submitted": sum(1 for j in self.jobs.values() if last <= j["created_at"] < minute),
        }

    async def cost_counts(self) -> list[Row]:
        rows = []
        for label, span in (("hour", timedelta(hours=1)), ("day", timedelta(days=1))):
            since = _now() - span
            made = [j["created_at"] for j in self.jobs.values() if j["created_at"] >= since]
            ended = [a for runs in self.attempts.values() for a in runs
                     if a["finished_at"] is not None and a["finished_at"] >= since]  # fmt: skip
            seconds = sum((a["finished_at"] - a["started_at"]).total_seconds() for a in ended)
            rows.append({"label": label, "jobs": len(made), "requests": len(set(made)),
                         "attempts": len(ended), "attempt_seconds": seconds})  # fmt: skip
        return rows

    async def count_dead(self) -> int:
        return sum(1 for j in self.jobs.values() if j["status"] == JobStatus.DEAD)


def _key(after: tuple[datetime, str]) -> tuple[datetime, uuid.UUID]:
    return after[0], uuid.UUID(after[1])
