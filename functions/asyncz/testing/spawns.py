"""In-memory spawned jobs: the store's ``spawns`` part (:class:`asyncz.wait_ports.SpawnStore`)
on the memory store's dicts, fenced by the spawner's lease as ``insert_spawned_job`` is."""

from __future__ import annotations

import json
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
        self.gathers: dict[tuple[str, int], dict[str, Any]] = {}  # (job id, seq) -> wait
        self.edges: dict[tuple[str, str, int], bool] = {}  # (child, job id, seq) -> settled
        store.steps.openers["gather"] = self.open_gather  # type: ignore[attr-defined]

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

    async def cascade(self, ended_ids: Sequence[str], limit: int) -> list[Row]:
        jobs = self.store.jobs
        cancelled = {i for i in ended_ids if (p := jobs.get(i)) and p["status"] == "cancelled"}
        page = sorted(
            (j for j in jobs.values()
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
        gatherers = sorted({g for (c, g, _), settled in self.edges.items()
                            if c in ended_ids and not settled})  # fmt: skip
        return [{**dispatch_row(j), "kind": "cancelled"} for j in page] + [
            {"kind": "gatherer", "id": g} for g in gatherers]  # fmt: skip

    async def settle(self, gatherer_id: str, ended_ids: Sequence[str] | None, *,
                     wake: bool = True) -> list[Row]:  # fmt: skip
        jobs, steps = self.store.jobs, self.store.steps  # type: ignore[attr-defined]
        counted: dict[int, int] = {}
        for (c, g, seq), settled in self.edges.items():
            if g != gatherer_id or settled or (ended_ids is not None and c not in ended_ids):
                continue
            if c in jobs and str(jobs[c]["status"]) in _LIVE:
                continue
            self.edges[(c, g, seq)] = True
            counted[seq] = counted.get(seq, 0) + 1
        woken = False
        for seq, n in counted.items():
            wait = steps.rows.get(gatherer_id, {}).get(seq)
            if wait is None or wait["status"] != "waiting":
                continue
            self.gathers[(gatherer_id, seq)]["pending"] -= n
            if self.gathers[(gatherer_id, seq)]["pending"] <= 0:
                value = self._value((gatherer_id, seq))
                wait.update(status="completed", result=json.loads(value),
                            result_bytes=len(value), finished_at=now_utc())  # fmt: skip
                woken = True
        live = gatherer_id in jobs and str(jobs[gatherer_id]["status"]) in _LIVE
        return [steps.wake(gatherer_id)] if woken and wake and live else []

    async def waiting_gatherers(self, after: str, limit: int) -> list[str]:
        steps: Any = self.store.steps  # type: ignore[attr-defined]
        jobs = self.store.jobs
        found = sorted({g for (g, seq) in self.gathers
                        if steps.rows.get(g, {}).get(seq, {}).get("status") == "waiting"
                        and uuid.UUID(g) > uuid.UUID(after) and g in jobs
                        and str(jobs[g]["status"]) in _LIVE}, key=uuid.UUID)  # fmt: skip
        return found[:limit]

    async def progress(self, job_id: str) -> Row | None:
        steps: Any = self.store.steps  # type: ignore[attr-defined]
        waits = sorted(seq for (g, seq) in self.gathers
                       if g == job_id and steps.rows[g][seq]["status"] == "waiting")  # fmt: skip
        if not waits:
            return None
        w = self.gathers[(job_id, waits[0])]
        name = self.store.steps.rows[job_id][waits[0]]["name"]  # type: ignore[attr-defined]
        return {"name": name, "pending": w["pending"], "total": len(w["jobs"])}

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

    # --- the gather wait's opener and count (migration 0021's trigger) ------------------

    def open_gather(self, job_id: str, step: dict[str, Any]) -> str | None:
        """A gather begins: its edges stored (to ended jobs: settled); none live: its value."""
        terms = json.loads(step["result"])
        jobs = self.store.jobs
        key = (job_id, step["seq"])
        live = 0
        for child in terms["jobs"]:
            alive = child in jobs and str(jobs[child]["status"]) in _LIVE
            if alive:
                jobs[child]["has_dependents"] = True
            live += alive
            self.edges.setdefault((child, job_id, step["seq"]), not alive)
        self.gathers[key] = {"jobs": terms["jobs"], "pending": live,
                             "max_bytes": terms["max_bytes"]}  # fmt: skip
        return None if live else self._value(key)

    def _value(self, key: tuple[str, int]) -> str:
        w, jobs = self.gathers[key], self.store.jobs
        ends = [{"job_id": c, "status": str(jobs[c]["status"]) if c in jobs else "purged",
                 "result": jobs[c]["result"] if c in jobs else None,
                 "error": jobs[c]["last_error"] if c in jobs else None}
                for c in w["jobs"]]  # fmt: skip
        text = json.dumps(ends)
        if len(text) > w["max_bytes"]:
            text = json.dumps({"too_large": len(text), "max_bytes": w["max_bytes"]})
        return text
