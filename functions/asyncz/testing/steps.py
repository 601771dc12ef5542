"""In-memory steps of durable tasks: the store's ``steps`` part
(:class:`asyncz.store_ports.StepStore`) on dicts, fenced by the lease as ``save_step`` is."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asyncz.jobs import JobStatus, Lease
from asyncz.port_types import Row
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables

_KINDS = {"finished": {"completed", "cancelled"}, "dead": {"dead"}}


class MemorySteps:
    def __init__(self, store: StoreTables) -> None:
        self.store = store
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}  # job id -> seq -> row

    async def save(self, job_id: str, token: str, step: Row) -> bool:
        j = self.store.jobs.get(job_id)
        if j is None or j["status"] != "processing" or j["lease_token"] != token:
            return False
        steps = self.rows.setdefault(job_id, {})
        old = steps.get(step["seq"])
        if old is not None and (old["status"] != "failed" or old["name"] != step["name"]):
            return False
        now = now_utc()
        result = None if step["result"] is None else json.loads(step["result"])
        steps[step["seq"]] = {
            **{k: step[k] for k in ("seq", "name", "kind", "after_name", "status",
                                   "result_bytes", "error", "job_attempt")},
            "result": result,
            "attempts": step["attempts"] + (old["attempts"] if old else 0),
            "started_at": now - timedelta(seconds=step["seconds"]),
            "finished_at": now,
        }  # fmt: skip
        return True

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> Row | None:
        j = self.store.jobs.get(lease.job_id)
        if j is None or j["status"] != "processing" or j["lease_token"] != lease.token:
            return None
        now = now_utc()
        cancelled = j["cancel_requested"]
        j.update(status=JobStatus.CANCELLED if cancelled else JobStatus.SUSPENDED,
                 finished_at=now if cancelled else None, updated_at=now, lease_token=None,
                 heartbeat_at=None, suspensions=j["suspensions"] + 1,
                 suspended_for=reason[:500],
                 first_started_at=j["first_started_at"] or j["started_at"])  # fmt: skip
        if not cancelled:
            j["run_at"] = now + timedelta(seconds=delay_seconds)
        self.store.close_attempt(j, "cancelled" if cancelled else "suspended", None)
        return dispatch_row(j)

    def _page(self, job_id: str, after_seq: int, limit: int) -> list[dict[str, Any]]:
        steps = self.rows.get(job_id, {})
        return [steps[s] for s in sorted(steps) if s > after_seq][:limit]

    async def load(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        keys = ("seq", "name", "kind", "after_name", "status", "result", "result_bytes",
                "attempts", "job_attempt")  # fmt: skip
        return [{k: r[k] for k in keys} for r in self._page(job_id, after_seq, limit)]

    async def list(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        out = []
        for r in self._page(job_id, after_seq, limit):
            ms = int((r["finished_at"] - r["started_at"]).total_seconds() * 1000)
            keys = ("seq", "name", "kind", "status", "attempts", "job_attempt", "started_at",
                    "finished_at", "result_bytes", "error")  # fmt: skip
            out.append({**{k: r[k] for k in keys}, "duration_ms": ms})
        return out

    async def reset(self, job_id: str) -> int:
        j = self.store.jobs.get(job_id)
        if j is None or j["status"] != "dead":
            return 0
        return len(self.rows.pop(job_id, {}))

    async def prune(self, kind: str, older_than: float, jobs: int, limit: int) -> int:
        cutoff = now_utc() - timedelta(seconds=older_than)
        needed = self.store.dependencies.needed
        old = sorted(
            (j for j in self.store.jobs.values()
             if j["status"] in _KINDS[kind] and j["finished_at"] and j["finished_at"] < cutoff
             and not needed(j["id"])),
            key=lambda j: (j["finished_at"], uuid.UUID(j["id"])),
        )[:jobs]  # fmt: skip
        gone = 0
        for j in old:
            steps = self.rows.get(j["id"], {})
            for seq in sorted(steps)[: limit - gone]:
                del steps[seq]
                gone += 1
        return gone

    def forget(self, job_id: str) -> None:
        """The job was deleted: its steps go with it (the foreign key's cascade)."""
        self.rows.pop(job_id, None)
