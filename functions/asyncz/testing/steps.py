"""In-memory steps and waits of durable tasks: the store's ``steps`` part
(:class:`asyncz.store_ports.StepStore`) on dicts, fenced by the lease as ``save_step`` is.
A kind of wait whose wait may be resolved when it begins registers an opener in
``openers`` (events do: a stored event resolves it), as the SQL names ``open_<kind>_wait``."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asyncz.jobs import JobStatus, Lease
from asyncz.port_types import Row
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables

_KINDS = {"finished": {"completed", "cancelled"}, "dead": {"dead"}}
LIVE = ("queued", "processing", "suspended")  # a resolve wakes these; an ended job keeps its wait
# kind -> (job id, the new wait's row) -> the value it takes at once (JSON text), or None
Opener = Callable[[str, dict[str, Any]], str | None]


class MemorySteps:
    def __init__(self, store: StoreTables) -> None:
        self.store = store
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}  # job id -> seq -> row
        self.openers: dict[str, Opener] = {}
        self._callback_key = secrets.token_bytes(32)

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
            "wait_until": step.get("wait_until"), "wait_key": step.get("wait_key"),
        }  # fmt: skip
        return True

    async def open_wait(self, job_id: str, token: str, step: Row) -> Row | None:
        if not self._holds(job_id, token) or step["seq"] in self.rows.get(job_id, {}):
            return None
        opener = self.openers.get(step["kind"])
        value = opener(job_id, step) if opener is not None else None
        row = {**step, "status": "waiting" if value is None else "completed", "error": None,
               "result_bytes": 0 if value is None else len(value), "attempts": 1,
               "seconds": 0.0,
               "result": value if value is not None else step["result"]}  # fmt: skip
        await self.save(job_id, token, row)
        stored = self.rows[job_id][step["seq"]]
        return {"status": stored["status"], "result": stored["result"]}

    def _holds(self, job_id: str, token: str) -> bool:
        j = self.store.jobs.get(job_id)
        return j is not None and j["status"] == "processing" and j["lease_token"] == token

    def waiting(self, job_id: str, seq: int) -> dict[str, Any] | None:
        """The step if it is a wait still waiting, of a job that has not ended."""
        j = self.store.jobs.get(job_id)
        row = self.rows.get(job_id, {}).get(seq)
        if j is None or str(j["status"]) not in LIVE or row is None:
            return None
        return row if row["status"] == "waiting" else None

    def _complete(self, row: dict[str, Any], result: str, size: int) -> None:
        row.update(status="completed", result=json.loads(result), result_bytes=size,
                   finished_at=now_utc())  # fmt: skip

    async def resolve(self, job_id: str, seq: int, result: str, size: int) -> Row | None:
        row = self.waiting(job_id, seq)
        if row is None:
            return None
        self._complete(row, result, size)
        return self.wake(job_id)

    def wake(self, job_id: str) -> Row:
        """A wait of the job was resolved: a running attempt is marked woken (its suspension
        wakes at once), a suspended job is due now."""
        j = self.store.jobs[job_id]
        now = now_utc()
        if j["status"] == "processing":
            j["woken"] = True
        elif j["status"] == "suspended":
            j["run_at"] = min(j["run_at"], now)
        j["updated_at"] = now
        return {**dispatch_row(j), "due": True}

    async def resolve_keyed(self, kind: str, wait_key: str, result: str, size: int,
                            resolver: str | None, after_job: str | None, limit: int
                            ) -> list[Row]:  # fmt: skip
        firsts: dict[str, dict[str, Any]] = {}
        for job_id in sorted(self.rows, key=uuid.UUID):
            if after_job is not None and uuid.UUID(job_id) <= uuid.UUID(after_job):
                continue
            for seq in sorted(self.rows[job_id]):
                r = self.rows[job_id][seq]
                if r["status"] == "waiting" and r["kind"] == kind and r["wait_key"] == wait_key:
                    firsts[job_id] = r
                    break
            if len(firsts) == limit:
                break
        out = []
        for job_id, r in firsts.items():
            terms = r["result"] if isinstance(r["result"], dict) else {}
            accepts = "from" not in terms or (resolver is not None and resolver in terms["from"])
            value = json.loads(result)
            accepts = accepts and not any(  # this job took this very value on this key
                t["kind"] == kind and t["wait_key"] == wait_key and t["status"] == "completed"
                and t["result"] == value for t in self.rows[job_id].values())  # fmt: skip
            woken = None
            if accepts and self.waiting(job_id, r["seq"]) is not None:
                self._complete(r, result, size)
                woken = self.wake(job_id)
            out.append({**(woken or {"id": job_id}), "resolved": woken is not None})
        return out

    async def time_out(self, lease: Lease, seq: int, result: str) -> Row | None:
        if not self._holds(lease.job_id, lease.token):
            return None
        row = self.rows.get(lease.job_id, {}).get(seq)
        if row is not None and row["status"] == "waiting":
            self._complete(row, result, len(result))
            row["job_attempt"] = lease.attempt
            return {"timed_out": True, "result": row["result"]}
        return {"timed_out": False, "result": row["result"] if row else None}

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> Row | None:
        j = self.store.jobs.get(lease.job_id)
        if j is None or j["status"] != "processing" or j["lease_token"] != lease.token:
            return None
        now = now_utc()
        cancelled, woken = j["cancel_requested"], j["woken"]
        j.update(status=JobStatus.CANCELLED if cancelled else JobStatus.SUSPENDED, woken=False,
                 finished_at=now if cancelled else None, updated_at=now, lease_token=None,
                 heartbeat_at=None, suspensions=j["suspensions"] + 1,
                 suspended_for=reason[:500],
                 first_started_at=j["first_started_at"] or j["started_at"])  # fmt: skip
        if not cancelled:
            j["run_at"] = now if woken else now + timedelta(seconds=delay_seconds)
        self.store.close_attempt(j, "cancelled" if cancelled else "suspended", None)
        return {**dispatch_row(j), "due": j["run_at"] <= now}

    def _page(self, job_id: str, after_seq: int, limit: int) -> list[dict[str, Any]]:
        steps = self.rows.get(job_id, {})
        return [steps[s] for s in sorted(steps) if s > after_seq][:limit]

    async def load(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        keys = ("seq", "name", "kind", "after_name", "status", "result", "result_bytes",
                "attempts", "job_attempt", "wait_until")  # fmt: skip
        return [{k: r[k] for k in keys} for r in self._page(job_id, after_seq, limit)]

    async def callback_key(self) -> bytes:
        return self._callback_key

    async def peek(self, job_id: str, seq: int) -> Row | None:
        row = self.rows.get(job_id, {}).get(seq)
        return None if row is None else {k: row[k] for k in ("status", "result", "wait_until")}

    async def list(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        out = []
        for r in self._page(job_id, after_seq, limit):
            ms = int((r["finished_at"] - r["started_at"]).total_seconds() * 1000)
            keys = ("seq", "name", "kind", "status", "attempts", "job_attempt", "started_at",
                    "finished_at", "result_bytes", "error", "wait_until")  # fmt: skip
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
