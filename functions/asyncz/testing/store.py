"""In-memory job store: the service's store port without a server, for fast unit tests.

It follows the same contract as the PostgreSQL adapter (one contract suite runs against
both: tests/support/contract.py), fences included: every state change checks the lease
token and the status, as the SQL does. Not thread-safe; one event loop.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from asyncz.errors import InvalidInputError
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob, unstorable
from asyncz.port_types import Row, epoch_ms
from asyncz.testing.access import MemoryAccess
from asyncz.testing.activity import MemoryActivity
from asyncz.testing.callbacks import MemoryCallbacks
from asyncz.testing.dependencies import MemoryDependencies
from asyncz.testing.events import MemoryEvents
from asyncz.testing.listings import MemoryListings, job_view
from asyncz.testing.maintenance import MemoryMaintenance, dispatch_row, now_utc
from asyncz.testing.outbox import JobRow, MemoryOutbox
from asyncz.testing.spawns import MemorySpawns
from asyncz.testing.steps import MemorySteps
from asyncz.testing.store_limits import MemoryStoreLimits
from asyncz.testing.unique import MemoryUnique
from asyncz.testing.webhooks import MemoryWebhooks

_now = now_utc
_CLAIMABLE = ("queued", "suspended")  # a due suspended job's claim is its wake


class MemoryStore(MemoryListings):
    """The job store (:class:`asyncz.ports.JobStore`) on dicts."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.attempts: dict[str, list[dict[str, Any]]] = {}
        self.periodic: dict[tuple[str, datetime], str | None] = {}  # (task, slot) -> job id
        self.maintenance = MemoryMaintenance(self)
        self.dependencies = MemoryDependencies(self)
        self.limits = MemoryStoreLimits(self)
        self.access = MemoryAccess()
        self.activity = MemoryActivity(self)
        self.unique = MemoryUnique(self)
        self.steps: MemorySteps = MemorySteps(self)
        self.events = MemoryEvents(self.jobs, self.steps)
        self.callbacks = MemoryCallbacks(self.steps)
        self.spawns = MemorySpawns(self)
        self.webhooks = MemoryWebhooks()
        self.outbox = MemoryOutbox(self.jobs.get)

    # --- submit and read -----------------------------------------------------------------

    async def insert_job(self, job_id: str, new: NewJob, **state: Any) -> Row | None:
        """``state``: the status and dependency columns a planned job starts with."""
        for value in (new.payload, new.idempotency_key, new.queue, new.task):
            if unstorable(value):
                raise InvalidInputError("a value cannot be stored")
        key = new.idempotency_key
        if key is not None and any(j["idempotency_key"] == key for j in self.jobs.values()):
            return None
        now = _now()
        run_at = new.run_at or now + timedelta(seconds=new.delay_seconds)
        self.jobs[job_id] = row = JobRow({
            "id": job_id, "task": new.task, "payload": new.payload, "queue": new.queue,
            "priority": new.priority, "status": JobStatus.QUEUED, "attempts": 0,
            "attempt_base": 0, "max_retries": new.max_retries, "timeout_seconds":
            new.timeout_seconds, "idempotency_key": key, "run_at": run_at, "lease_token": None,
            "worker_id": None, "heartbeat_at": None, "cancel_requested": False, "result": None,
            "last_error": None, "created_at": now, "started_at": None, "finished_at": None,
            "updated_at": now, "progress": None, "progress_message": None,
            "open_parents": 0, "depth": 0, "has_dependents": False, "cascade_pending": False,
            "concurrency_key": new.concurrency_key,
            "submitted_by": new.submitted_by, "submitted_by_key_id": new.submitted_by_key_id,
            "traceparent": new.traceparent, "tracestate": new.tracestate,
            "suspensions": 0, "first_started_at": None, "suspended_for": None, "woken": False,
        })  # fmt: skip
        row.outbox = self.outbox  # its status changes write their events
        row.update(state)
        self.attempts[job_id] = []
        return {"run_at_ms": epoch_ms(run_at), "due": run_at <= now}

    async def insert_jobs(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        for _, new in items:  # one statement: an unstorable value stores none of them
            for value in (new.payload, new.idempotency_key, new.queue, new.task):
                if unstorable(value):
                    raise InvalidInputError("a value cannot be stored")
        out = [await self.insert_job(job_id, new) for job_id, new in items]
        made = [self.jobs[job_id] for (job_id, _), row in zip(items, out, strict=True) if row]
        for job in made:  # one transaction: PostgreSQL's now() is the same for all
            job["created_at"] = job["updated_at"] = made[0]["created_at"]
        return out

    async def get_by_idempotency_keys(self, keys: Sequence[str]) -> dict[str, Row]:
        wanted = set(keys)
        return {
            j["idempotency_key"]: _found(j) for j in self.jobs.values()
            if j["idempotency_key"] in wanted
        }  # fmt: skip

    async def get_by_idempotency_key(self, key: str) -> Row | None:
        for j in self.jobs.values():
            if j["idempotency_key"] == key:
                return _found(j)
        return None

    async def find_jobs(self, ids: Sequence[str]) -> dict[str, Row]:
        return {i: _found(j) for i in ids if (j := self.jobs.get(i))}

    async def get_job(self, job_id: str) -> Job | None:
        row = self.jobs.get(job_id)
        return job_view(row) if row else None

    async def list_attempts(self, job_id: str) -> list[Attempt]:
        return [Attempt(**a) for a in self.attempts.get(job_id, [])][-1000:]

    async def ping(self) -> None:
        return None

    # --- worker: claim, heartbeat, finish (fenced by the lease token) ----------------------

    async def claim(
        self, ids: Sequence[str], worker_id: str, max_timeout: int, nonce: str | None = None
    ) -> list[Lease]:
        now, leases, nonce = _now(), [], nonce or uuid.uuid4().hex
        for job_id in ids:
            j = self.jobs.get(job_id)
            if not j or j["status"] not in _CLAIMABLE or j["run_at"] > now or j["cancel_requested"]:
                continue
            if j["timeout_seconds"] > max_timeout or j["queue"] in self.limits.paused:
                continue
            if j["status"] != "suspended":  # a wake keeps the job's progress
                j.update(progress=None, progress_message=None)
            j.update(
                status=JobStatus.PROCESSING, lease_token=_token(nonce, job_id), worker_id=worker_id,
                attempts=j["attempts"] + 1, heartbeat_at=now, started_at=now, updated_at=now,
            )  # fmt: skip
            self.attempts[job_id].append(
                {"job_id": job_id, "attempt": j["attempts"], "worker_id": worker_id,
                 "started_at": now, "finished_at": None, "outcome": None, "error": None,
                 "duration_ms": None}
            )  # fmt: skip
            leases.append(_lease(j))
        return leases

    async def adopt(self, ids: Sequence[str], nonce: str) -> list[Lease]:
        return [
            _lease(j) for i in ids if (j := self.jobs.get(i)) and j["status"] == "processing"
            and j["lease_token"] == _token(nonce, i)
        ]  # fmt: skip

    async def unclaimed(self, ids: Sequence[str]) -> list[Row]:
        now = _now()
        return [
            {"id": j["id"], "queue": j["queue"], "priority": j["priority"],
             "run_at": j["run_at"], "due": j["run_at"] <= now, "task": j["task"],
             "concurrency_key": j["concurrency_key"], "wake": j["status"] == "suspended"}
            for i in ids
            if (j := self.jobs.get(i)) and j["status"] in _CLAIMABLE and not j["cancel_requested"]
        ]  # fmt: skip

    def _held(self, lease: Lease) -> dict[str, Any] | None:
        j = self.jobs.get(lease.job_id)
        if j and j["status"] == "processing" and j["lease_token"] == lease.token:
            return j
        return None

    async def heartbeat(self, leases: Sequence[Lease]) -> dict[str, bool]:
        held = {}
        for lease in leases:
            if (j := self._held(lease)) is not None:
                j["heartbeat_at"] = j["updated_at"] = _now()
                held[lease.job_id] = bool(j["cancel_requested"])
        return held

    async def save_progress(self, reports: Sequence[tuple[Lease, float, str | None]]) -> set[str]:
        held = set()
        for lease, fraction, message in reports:
            j = self.jobs.get(lease.job_id)
            if j and j["status"] == "processing" and j["lease_token"] == lease.token:
                j.update(progress=fraction, progress_message=message, updated_at=now_utc())
                held.add(lease.job_id)
        return held

    def close_attempt(self, j: dict[str, Any], outcome: str, error: str | None) -> None:
        a = self.attempts[j["id"]][-1]
        now = _now()
        a.update(finished_at=now, outcome=AttemptOutcome(outcome), error=error,
                 duration_ms=int((now - a["started_at"]).total_seconds() * 1000))  # fmt: skip

    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> dict[str, bool]:
        if any(unstorable(result) for _, result in done):
            raise InvalidInputError("a value cannot be stored")  # one statement: all or none
        held = {}
        for lease, result in done:
            if (j := self._held(lease)) is not None:
                now = _now()
                j.update(status=JobStatus.COMPLETED, result=result, finished_at=now, updated_at=now,
                         lease_token=None, heartbeat_at=None, last_error=None)  # fmt: skip
                self.close_attempt(j, "completed", None)
                held[lease.job_id] = j["has_dependents"]
        return held

    async def complete(self, lease: Lease, result: Any) -> bool:
        return lease.job_id in await self.complete_many([(lease, result)])

    async def finish_failed(
        self,
        lease: Lease,
        *,
        status: JobStatus,
        outcome: AttemptOutcome,
        error: str,
        delay_seconds: float = 0.0,
    ) -> Row | None:
        j = self._held(lease)
        if j is None:
            return None
        now = _now()
        final = JobStatus.CANCELLED if j["cancel_requested"] else status
        requeued = final is JobStatus.QUEUED
        j.update(status=final, last_error=error, updated_at=now, lease_token=None,
                 heartbeat_at=None, finished_at=None if requeued else now)  # fmt: skip
        if requeued:
            j["run_at"] = now + timedelta(seconds=delay_seconds)
        self.close_attempt(j, str(outcome), error)
        return _dispatch_row(j)

    # --- operator actions --------------------------------------------------------------

    async def cancel(self, job_id: str) -> Row | None:
        j = self.jobs.get(job_id)
        if not j or j["status"] not in ("waiting", "queued", "processing", "suspended"):
            return None
        if j["status"] in ("waiting", "queued", "suspended"):  # nothing runs it: at once
            j.update(status=JobStatus.CANCELLED, finished_at=_now(),
                     cascade_pending=j["has_dependents"])  # fmt: skip
        j.update(cancel_requested=True, updated_at=_now())
        return {"id": job_id, "status": str(j["status"]), "queue": j["queue"],
                "has_dependents": j["has_dependents"],
                "cascade_pending": j["cascade_pending"]}  # fmt: skip

    def _replay(self, j: dict[str, Any]) -> Row:
        j.update(status=JobStatus.QUEUED, attempt_base=j["attempts"], run_at=_now(),
                 suspensions=0, first_started_at=None,
                 finished_at=None, started_at=None, worker_id=None, cancel_requested=False,
                 cascade_pending=j["has_dependents"], updated_at=_now())  # fmt: skip
        return _dispatch_row(j)

    async def replay(self, job_id: str) -> Row | None:
        j = self.jobs.get(job_id)
        return self._replay(j) if j and j["status"] == "dead" else None

    async def replay_dead(self, *, queue: str | None, task: str | None, limit: int) -> list[Row]:
        dead = [
            j
            for j in self.jobs.values()
            if j["status"] == "dead"
            and (queue is None or j["queue"] == queue)
            and (task is None or j["task"] == task)
        ]
        dead.sort(key=lambda j: (j["finished_at"], j["id"]))
        return [self._replay(j) for j in dead[:limit]]

    async def purge_dead(self, job_id: str) -> bool:
        j = self.jobs.get(job_id)
        if j and j["status"] == "dead" and not self.dependencies.needed(job_id):
            self.delete(job_id)
            return True
        return False

    def delete(self, job_id: str) -> None:
        """A job goes with its attempts and its own dependency rows (not its children's)."""
        del self.jobs[job_id], self.attempts[job_id]
        self.dependencies.forget(job_id)
        self.steps.forget(job_id)


def _found(j: dict[str, Any]) -> Row:
    return {**dispatch_row(j), "due": j["run_at"] <= _now()}


_dispatch_row = dispatch_row


def _token(nonce: str, job_id: str) -> str:
    """The lease token PostgreSQL derives: md5(nonce || id)::uuid."""
    return str(uuid.UUID(hashlib.md5((nonce + job_id).encode()).hexdigest()))  # noqa: S324


def _lease(j: dict[str, Any]) -> Lease:
    return Lease(job_id=j["id"], token=j["lease_token"], task=j["task"], payload=j["payload"],
                 queue=j["queue"], priority=j["priority"], attempt=j["attempts"],
                 attempt_base=j["attempt_base"], max_retries=j["max_retries"],
                 timeout_seconds=j["timeout_seconds"], has_parents=j["depth"] > 0,
                 concurrency_key=j["concurrency_key"], traceparent=j["traceparent"],
                 tracestate=j["tracestate"], suspensions=j["suspensions"])  # fmt: skip
