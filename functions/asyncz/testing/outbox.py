"""The in-memory outbox: what the jobs table's trigger does in PostgreSQL (migration 0023),
done by the job rows themselves. A row of :class:`JobRow` appends an event when its status
becomes an end (completed, dead, cancelled) or leaves 'dead' (a replay), whichever code sets
it; the publisher's side is :class:`MemoryOutbox` (the store's ``outbox`` part)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from asyncz.outbox.ports import BACKLOG_CAP, Publish
from asyncz.port_types import Row
from asyncz.testing.maintenance import now_utc

ENDS = ("completed", "dead", "cancelled")


class MemoryOutbox:
    def __init__(self, jobs: Callable[[str], dict[str, Any] | None]) -> None:
        self._job = jobs
        self.rows: list[Row] = []  # unpublished, oldest first

    def changed(self, job: dict[str, Any], old: str, new: str) -> None:
        """A job's status went from ``old`` to ``new``: its event, if it is one."""
        if new == old or not (new in ENDS or old == "dead"):
            return
        kind = "replayed" if old == "dead" else new
        self.rows.append({
            "id": str(uuid.uuid4()), "type": f"asyncz.job.{kind}", "job_id": job["id"],
            "task": job["task"], "queue": job["queue"], "status": new,
            "attempts": job["attempts"], "submitted_at": job["created_at"],
            "started_at": job["started_at"], "finished_at": job.get("finished_at"),
            "submitted_by": job["submitted_by"], "traceparent": job["traceparent"],
            "tracestate": job["tracestate"], "created_at": now_utc(), "job": job,
        })  # fmt: skip

    def _view(self, row: Row, result_bytes: int) -> Row:
        view = {k: v for k, v in row.items() if k != "job"}
        job = row["job"]
        # timings set by the same change after its status (the SQL sets them at once)
        view["finished_at"] = view["finished_at"] or job.get("finished_at")
        view["result"] = None
        current = self._job(row["job_id"]) if row["type"] == "asyncz.job.completed" else None
        if (
            result_bytes > 0 and current is not None and current["status"] == "completed"
            and current["finished_at"] == view["finished_at"]
            and len(json.dumps(current["result"]).encode()) <= result_bytes
        ):  # fmt: skip
            view["result"] = current["result"]
        return view

    async def publish_page(self, limit: int, result_bytes: int, publish: Publish) -> int:
        page = self.rows[:limit]
        if not page:
            return 0
        await publish([self._view(r, result_bytes) for r in page])
        taken = {id(r) for r in page}
        self.rows = [r for r in self.rows if id(r) not in taken]
        return len(page)

    async def any_pending(self) -> bool:
        return bool(self.rows)

    async def gauges(self) -> Row:
        if not self.rows:
            return {"backlog": 0, "oldest_age": 0.0}
        age = (now_utc() - self.rows[0]["created_at"]).total_seconds()
        return {"backlog": min(len(self.rows), BACKLOG_CAP), "oldest_age": age}

    async def prune(self, older_than: float, limit: int) -> int:
        cutoff: datetime = now_utc() - timedelta(seconds=older_than)
        old = [r for r in self.rows if r["created_at"] < cutoff][:limit]
        gone = {id(r) for r in old}
        self.rows = [r for r in self.rows if id(r) not in gone]
        return len(old)


class JobRow(dict[str, Any]):
    """A job's row that tells the outbox of each status change, as the trigger does."""

    outbox: MemoryOutbox | None = None

    def __setitem__(self, key: str, value: Any) -> None:
        old = self.get("status") if key == "status" else None
        super().__setitem__(key, value)
        if key == "status" and self.outbox is not None and old is not None:
            self.outbox.changed(self, str(old), str(value))

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():
            self[key] = value
