"""In-memory spawned jobs: the store's ``spawns`` part (:class:`asyncz.store_ports.SpawnStore`)
on the memory store's dicts, fenced by the spawner's lease as ``insert_spawned_job`` is."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asyncz.jobs import Job, JobStatus, Lease, NewJob
from asyncz.port_types import Row
from asyncz.testing.listings import job_view
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables

_LIVE = ("waiting", "queued", "processing", "suspended")


class MemorySpawns:
    def __init__(self, store: StoreTables) -> None:
        self.store = store

    async def insert(self, lease: Lease, job_id: str, new: NewJob, max_depth: int) -> Row | None:
        p = self.store.jobs.get(lease.job_id)
        if p is None or p["status"] != "processing" or p["lease_token"] != lease.token:
            return None
        depth = p.get("spawn_depth", 0)
        out = {"spawn_depth": depth, "too_deep": depth >= max_depth, "inserted": False,
               "run_at_ms": None, "due": None}  # fmt: skip
        if out["too_deep"]:
            return out
        p["has_dependents"] = True
        if job_id in self.store.jobs:
            return out
        new = replace(new, submitted_by=p["submitted_by"],
                      submitted_by_key_id=p["submitted_by_key_id"])  # fmt: skip
        state = {"spawned_by": lease.job_id, "spawn_depth": depth + 1}
        if new.unique_key is not None:
            row = await self.store.unique.insert(job_id, new)  # type: ignore[attr-defined]
            if row is None or row["id"] != job_id:  # held (a spawn never debounces)
                return out
            self.store.jobs[job_id].update(state)
        else:
            row = await self.store.insert_job(job_id, new, **state)
            if row is None:
                return out
        return {**out, "inserted": True, "run_at_ms": row["run_at_ms"], "due": row["due"]}

    async def find(self, job_id: str, new: NewJob) -> Row | None:
        jobs = self.store.jobs
        found = jobs.get(job_id)
        if found is None and new.idempotency_key is not None:
            found = next((j for j in jobs.values()
                          if j["idempotency_key"] == new.idempotency_key), None)  # fmt: skip
        if found is None and new.unique_key is not None:
            holders = await self.store.unique.holders([new.unique_key])  # type: ignore[attr-defined]
            held = holders.get(new.unique_key)
            found = jobs[str(held["id"])] if held else None
        if found is None:
            return None
        return {**dispatch_row(found), "due": found["run_at"] <= now_utc(),
                "spawned_by": found.get("spawned_by")}  # fmt: skip

    async def cancel(self, spawner_ids: Sequence[str], limit: int) -> list[Row]:
        cancelled = {i for i in spawner_ids
                     if (p := self.store.jobs.get(i)) and p["status"] == "cancelled"}  # fmt: skip
        page = sorted(
            (j for j in self.store.jobs.values()
             if j.get("spawned_by") in cancelled and j["status"] in _LIVE
             and not j["cancel_requested"]),
            key=lambda j: uuid.UUID(j["id"]),
        )[:limit]  # fmt: skip
        now = now_utc()
        for j in page:
            if j["status"] != "processing":
                j.update(status=JobStatus.CANCELLED, finished_at=now,
                         cascade_pending=j["has_dependents"])  # fmt: skip
            j.update(
                cancel_requested=True,
                updated_at=now,
                last_error=j["last_error"] or f"spawner_cancelled: {j['spawned_by']}",
            )
        return [dispatch_row(j) for j in page]

    async def count(self, job_id: str, limit: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        mine = [j for j in self.store.jobs.values() if j.get("spawned_by") == job_id][:limit]
        for j in mine:
            counts[str(j["status"])] = counts.get(str(j["status"]), 0) + 1
        return counts

    async def list(self, spawner_id: str, after: tuple[datetime, str] | None,
                   limit: int) -> list[Job]:  # fmt: skip
        def key(j: dict[str, Any]) -> tuple[datetime, uuid.UUID]:
            return j["created_at"], uuid.UUID(j["id"])

        rows = [j for j in self.store.jobs.values() if j.get("spawned_by") == spawner_id
                and (after is None or key(j) < (after[0], uuid.UUID(after[1])))]  # fmt: skip
        rows.sort(key=key, reverse=True)
        return [job_view(j) for j in rows[:limit]]
