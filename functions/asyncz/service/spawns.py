"""Spawned jobs (docs/durable.md, "Spawned jobs"): what a durable task's ``ctx.spawn``
stores, what ``GET /jobs/{id}`` says of a spawner and of a job that gathers, and the list of
a spawner's jobs. A part of :class:`asyncz.service.JobService`. (What an end adds to its
cascade, a cancelled spawner's jobs cancelled and a gather's count, runs in
:mod:`asyncz.service.dependencies` through the store's ``spawns`` part.)

A spawn is a step of its task (:mod:`asyncz.durable.spawning`): the child is committed,
fenced by the spawner's lease, before its id reaches Redis, and its id is deterministic, so
a spawn run again after a crash (the child stored, the step not) finds the same child.
"""

from __future__ import annotations

from typing import Any

from asyncz.errors import (
    InvalidInputError,
    InvalidPayloadError,
    SpawnRefusedError,
    StepLeaseLostError,
    StoreUnavailableError,
    UnknownQueueError,
    UnknownTaskError,
)
from asyncz.faults import crash_point
from asyncz.jobs import Job, Lease, NewJob
from asyncz.pagination import decode_cursor, encode_cursor, fit_page
from asyncz.port_types import Dispatch, Page
from asyncz.ports import JobStore
from asyncz.service.enqueue import Enqueuer
from asyncz.service.submitting import KEY_ROUNDS, Submitting
from asyncz.settings import Settings

SPAWNED_COUNTED = 10_000  # GET /jobs/{id} counts a spawner's jobs up to this many


class Spawns:
    def __init__(self, store: JobStore, enqueuer: Enqueuer, submitting: Submitting,
                 settings: Settings) -> None:  # fmt: skip
        self.store, self.enqueuer, self.submitting = store, enqueuer, submitting
        self.settings = settings
        self.max_gather_bytes = settings.max_gather_bytes  # what one gather may return

    async def spawn(self, lease: Lease, job_id: str, new: NewJob) -> dict[str, Any]:
        """Store the job ``job_id`` spawned by ``lease``'s attempt (once: a second call finds
        it), then enqueue it: ``{"job_id", "task", "created"}`` (``created`` False: a unique
        or idempotency key pointed it to a job another submit created)."""
        try:
            new = self.submitting.complete_defaults(new)
        except (UnknownTaskError, UnknownQueueError, InvalidPayloadError,
                InvalidInputError) as exc:  # fmt: skip
            raise SpawnRefusedError(f"spawn of {new.task!r}: {exc}") from None
        depth = self.settings.max_spawn_depth
        for _ in range(KEY_ROUNDS):
            row = await self.store.spawns.insert(lease, job_id, new, depth)
            if row is None:
                raise StepLeaseLostError("the spawned job was not stored: the lease is lost")
            if row["too_deep"]:
                raise SpawnRefusedError(
                    f"spawn of {new.task!r}: job {lease.job_id} is spawned {row['spawn_depth']} "
                    f"levels deep, the most ASYNCZ_MAX_SPAWN_DEPTH ({depth}) allows to spawn"
                )
            if row["inserted"]:
                crash_point("spawn.after_commit")  # chaos: the job is stored, the step is not
                await self.enqueuer.dispatch_quietly([Dispatch(
                    job_id, new.queue, new.priority, row["run_at_ms"], row["due"],
                    new.concurrency_key)])  # fmt: skip
                return {"job_id": job_id, "task": new.task, "created": True}
            found = await self.store.spawns.find(job_id, new)
            if found is not None:
                await self.enqueuer.enqueue_queued([found])  # an earlier try's, maybe unsent
                return {"job_id": found["id"], "task": new.task, "created": found["id"] == job_id}
            # the key's holder was purged between the two statements: the key is free again
        raise StoreUnavailableError(f"spawn of {new.task!r}: its key's holder kept changing")

    async def waiting_for(self, job: Job) -> str | None:
        """What a suspended job that gathers waits for, with how many of its jobs have
        ended (``37/100 spawned jobs ended: gather 'pages' ...``); None: it does not gather."""
        reason = job.suspended_for or ""
        if not reason.startswith("gather "):
            return None
        row = await self.store.spawns.progress(job.id)
        if row is None or row["total"] is None:
            return reason
        return f"{row['total'] - row['pending']}/{row['total']} spawned jobs ended: {reason}"

    async def describe(self, job: Job) -> dict[str, Any]:
        """For a spawner, ``spawned``: how many jobs it created, by status (counted up to
        :data:`SPAWNED_COUNTED`), and where to list them."""
        out: dict[str, Any] = {}
        if job.has_dependents:  # a spawn flags its spawner so
            counts = await self.store.spawns.count(job.id, SPAWNED_COUNTED)
            if counts:
                out["spawned"] = {"total": sum(counts.values()), "by_status": counts,
                                  "capped": sum(counts.values()) >= SPAWNED_COUNTED,
                                  "list": f"/jobs?spawned_by={job.id}"}  # fmt: skip
        return out

    async def page(self, spawner_id: str, limit: int, cursor: str | None,
                   key_id: str | None = None) -> Page:  # fmt: skip
        """``GET /jobs?spawned_by=``: a page of a spawner's jobs, newest first (``key_id``:
        only those of a key that may read its own jobs alone)."""
        jobs = await self.store.spawns.list(spawner_id, decode_cursor(cursor), limit)
        kept = fit_page(jobs)
        last = kept[-1] if len(jobs) == limit or len(kept) < len(jobs) else None
        if key_id is not None:
            kept = [j for j in kept if j.submitted_by_key_id == key_id]
        return Page(kept, encode_cursor(last.created_at, last.id) if last else None)
