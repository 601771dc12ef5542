"""The in-memory store's maintenance (recovery, retention, periodic jobs): its
``maintenance`` part (:class:`asyncz.ports.MaintenanceStore`) on the store's dicts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from asyncz.jobs import JobStatus, NewJob
from asyncz.port_types import Row, epoch_ms

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables


def now_utc() -> datetime:
    return datetime.now(UTC)


def dispatch_row(j: dict[str, Any]) -> Row:
    return {"id": j["id"], "status": str(j["status"]), "queue": j["queue"],
            "priority": j["priority"], "run_at": j["run_at"],
            "has_dependents": j["has_dependents"], "depth": j["depth"]}  # fmt: skip


class MemoryMaintenance:
    def __init__(self, store: StoreTables) -> None:
        self.store = store  # its tables, and its insert for a slot's job

    # --- recovery ------------------------------------------------------------------------

    async def recover_stale_leases(self, lease_timeout: float, limit: int) -> list[Row]:
        now = now_utc()
        stale = sorted(
            (j for j in self.store.jobs.values()
             if j["status"] == "processing"
             and j["heartbeat_at"] < now - timedelta(seconds=lease_timeout)),
            key=lambda j: j["heartbeat_at"],
        )[:limit]  # fmt: skip
        moved = []
        for j in stale:
            out = j["attempts"] - j["attempt_base"] - j["suspensions"] > j["max_retries"]
            final = "cancelled" if j["cancel_requested"] else "dead" if out else "queued"
            error = f"lease expired: worker {j['worker_id'] or '?'} stopped heartbeating"
            j.update(status=JobStatus(final), finished_at=None if final == "queued" else now,
                     run_at=now, lease_token=None, heartbeat_at=None, updated_at=now,
                     last_error=error)  # fmt: skip
            self.store.close_attempt(j, "lost", error)
            moved.append(dispatch_row(j))
        return moved

    async def scan_queued(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        now = now_utc()
        key = (after[0], uuid.UUID(after[1])) if after else None
        rows = sorted(
            (j for j in self.store.jobs.values()
             if j["status"] == "queued" and not j["cancel_requested"]
             and (key is None or (j["run_at"], uuid.UUID(j["id"])) > key)),
            key=lambda j: (j["run_at"], uuid.UUID(j["id"])),
        )[:limit]  # fmt: skip
        return [{**dispatch_row(j), "due": j["run_at"] <= now} for j in rows]

    async def scan_due_suspended(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        now = now_utc()
        key = (after[0], uuid.UUID(after[1])) if after else None
        rows = sorted(
            (j for j in self.store.jobs.values()
             if j["status"] == "suspended" and j["run_at"] <= now
             and (key is None or (j["run_at"], uuid.UUID(j["id"])) > key)),
            key=lambda j: (j["run_at"], uuid.UUID(j["id"])),
        )[:limit]  # fmt: skip
        return [{**dispatch_row(j), "due": True} for j in rows]

    # --- retention -----------------------------------------------------------------------

    def _prune(self, statuses: set[str], older_than: float, limit: int) -> int:
        cutoff = now_utc() - timedelta(seconds=older_than)
        needed = self.store.dependencies.needed
        doomed = sorted(
            (j for j in self.store.jobs.values()
             if j["status"] in statuses and j["finished_at"] and j["finished_at"] < cutoff
             and not needed(j["id"])),
            key=lambda j: (j["finished_at"], uuid.UUID(j["id"])),
        )[:limit]  # fmt: skip
        for j in doomed:
            self.store.delete(j["id"])
        return len(doomed)

    async def prune_finished(self, older_than: float, limit: int) -> int:
        return self._prune({"completed", "cancelled"}, older_than, limit)

    async def prune_dead(self, older_than: float, limit: int) -> int:
        return self._prune({"dead"}, older_than, limit)

    async def prune_periodic_runs(self, older_than: float) -> None:
        cutoff = now_utc() - timedelta(seconds=older_than)
        latest: dict[str, datetime] = {}
        for task, slot in self.store.periodic:
            latest[task] = max(slot, latest.get(task, slot))
        for task, slot in list(self.store.periodic):
            if slot < cutoff and slot < latest[task]:
                del self.store.periodic[(task, slot)]

    # --- periodic jobs -------------------------------------------------------------------

    async def last_periodic_runs(self, tasks: Sequence[str]) -> dict[str, Row]:
        last: dict[str, Row] = {}
        for (task, slot), job_id in self.store.periodic.items():
            if task in tasks and (task not in last or slot > last[task]["slot"]):
                last[task] = {"slot": slot, "job_id": job_id}
        return last

    async def mark_periodic_seen(self, task: str, slot: datetime) -> None:
        self.store.periodic.setdefault((task, slot), None)

    async def insert_periodic_job(self, job_id: str, slot: datetime, new: NewJob) -> Row | None:
        if (new.task, slot) in self.store.periodic:
            return None
        self.store.periodic[(new.task, slot)] = job_id
        row = await self.store.insert_job(job_id, new)
        return {"run_at_ms": row["run_at_ms"] if row else epoch_ms(), "due": True}
