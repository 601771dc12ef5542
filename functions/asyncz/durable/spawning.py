"""A durable task's spawned jobs (docs/durable.md, "Spawned jobs"): ``ctx.spawn`` submits a
job as a step of kind ``spawn`` whose stored value names the job, so a replay gets the same
job back and never submits a second one. The job's id is derived from the spawner, its
replay generation and the step's name: a spawn run again after a crash (the job stored, the
step not) finds the job it stored the first time instead of making another.

The submit itself is the service's (:class:`asyncz.service.spawns.Spawns`), the task
context's ``spawner``: the worker's service, or the in-memory one in tests. ``ctx.gather`` is
a wait (:mod:`asyncz.durable.waiting`) of kind ``gather``: its value, once the last of its
jobs has ended, is their ends in order (migration 0021 for how each end is counted).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Protocol

from asyncz.durable.running import StepCall
from asyncz.durable.waiting import WaitCall
from asyncz.errors import (
    GatherTimeoutError,
    SpawnedJobFailedError,
    SpawnRefusedError,
    StepLimitError,
    StepUsageError,
)
from asyncz.jobs import Lease, NewJob, UniqueScope
from asyncz.tracing import child_context

# uuid5 namespace of spawned jobs' ids (a constant: the same spawn gives the same id)
SPAWN_NAMESPACE = uuid.UUID("0f2f6e34-3c55-5b8e-9d61-5a3c2b1f7e20")
# the options a spawn takes, as NewJob's fields (dependencies, refs, a submitter and a
# debounce are not a spawn's: it waits on nothing, its submitter is its spawner's key, and
# it must not change a job another submit made)
SPAWN_OPTIONS = frozenset({
    "queue", "priority", "max_retries", "timeout_seconds", "delay_seconds", "run_at",
    "idempotency_key", "concurrency_key", "unique_key", "unique_scope", "unique_for",
})  # fmt: skip


class Spawner(Protocol):
    """What a spawn needs of the service (:class:`asyncz.service.spawns.Spawns`)."""

    max_gather_bytes: int  # ASYNCZ_MAX_GATHER_BYTES: what one gather may return

    async def spawn(self, lease: Lease, job_id: str, new: NewJob) -> dict[str, Any]: ...


class SpawningJournal(Protocol):
    """What a spawn needs of the attempt's journal (:mod:`asyncz.durable.journal`)."""

    lease: Lease
    loop: asyncio.AbstractEventLoop
    is_async: bool

    def auto_name(self, kind: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Spawned:
    """A job a durable task spawned: give it (or a list of them) to ``ctx.gather``."""

    job_id: str
    task: str
    created: bool  # False: its unique (or idempotency) key pointed it to another submit's job
    name: str  # the step that spawned it


def spawned_id(spawner_id: str, generation: int, name: str) -> str:
    """The id of the job step ``name`` spawns (``generation``: the spawner's replays, so a
    replay that starts its steps over spawns new jobs)."""
    return str(uuid.uuid5(SPAWN_NAMESPACE, f"{spawner_id}/{generation}/{name}"))


def new_spawn(task: str, payload: Any, options: dict[str, Any]) -> NewJob:
    """The job a spawn asks for, its options checked (a wrong one ends the job: it would be
    wrong on every replay too)."""
    unknown = sorted(set(options) - SPAWN_OPTIONS)
    if unknown:
        raise SpawnRefusedError(
            f"spawn of {task!r}: {', '.join(unknown)} is not a spawn's option "
            f"(it takes {', '.join(sorted(SPAWN_OPTIONS))})"
        )
    if not isinstance(task, str) or not isinstance(payload, dict):
        raise SpawnRefusedError("spawn(task, payload): a task's name and a dict payload")
    scope = options.get("unique_scope")
    if scope is not None:
        options = {**options, "unique_scope": UniqueScope(scope)}
    elif options.get("unique_key") is not None:
        options = {**options, "unique_scope": UniqueScope.QUEUED_OR_RUNNING}
    return NewJob(task=task, payload=payload, **options)


def spawn_call(journal: SpawningJournal, spawner: Spawner | None, task: str, payload: Any,
               name: str | None, options: dict[str, Any]) -> StepCall:  # fmt: skip
    """The step of one ``ctx.spawn``: its function stores the job (once) and enqueues it."""
    if spawner is None:
        raise StepUsageError("ctx.spawn needs a worker that can submit jobs")
    new = new_spawn(task, payload, options)
    traceparent, tracestate = child_context(journal.lease.traceparent, journal.lease.tracestate)
    new = NewJob(**{**{f.name: getattr(new, f.name) for f in fields(NewJob)},
                    "traceparent": traceparent, "tracestate": tracestate})  # fmt: skip
    step = name or journal.auto_name("spawn")
    lease = journal.lease
    job_id = spawned_id(lease.job_id, lease.attempt_base, step)

    def decode(value: dict[str, Any]) -> Spawned:
        return Spawned(value["job_id"], value["task"], bool(value["created"]), step)

    if journal.is_async:

        async def submit() -> dict[str, Any]:
            return await spawner.spawn(lease, job_id, new)

        return StepCall(step, "spawn", submit, decode=decode)

    def submit_from_thread() -> dict[str, Any]:
        future = asyncio.run_coroutine_threadsafe(spawner.spawn(lease, job_id, new), journal.loop)
        return future.result()

    return StepCall(step, "spawn", submit_from_thread, decode=decode)


def gather_call(spawned: Iterable[Spawned | str], *, timeout: float, return_exceptions: bool,
                name: str, max_bytes: int) -> WaitCall:  # fmt: skip
    """The wait of one ``ctx.gather``: its value, once every one of its jobs has ended, is
    their results in order (a job that ended dead or cancelled raises
    :class:`SpawnedJobFailedError`, or is one in its place with ``return_exceptions``). Its
    timeout passing first raises :class:`GatherTimeoutError`."""
    items = list(spawned)
    try:
        ids = [s.job_id if isinstance(s, Spawned) else str(uuid.UUID(s)) for s in items]
    except (TypeError, ValueError, AttributeError):
        raise StepUsageError(f"gather {name!r}: give it the jobs ctx.spawn returned") from None

    def decode(value: Any) -> list[Any]:
        if isinstance(value, dict) and value.get("timed_out"):
            raise GatherTimeoutError(
                f"gather {name!r}: its timeout of {timeout:g} s passed before every one of its "
                f"{len(ids)} spawned jobs had ended"
            )
        if isinstance(value, dict) and "too_large" in value:
            raise StepLimitError(
                f"gather {name!r}: the results of its {len(ids)} jobs are {value['too_large']} "
                f"bytes of JSON, more than ASYNCZ_MAX_GATHER_BYTES ({value['max_bytes']})"
            )
        out: list[Any] = []
        for end in value:
            if end["status"] == "completed":
                out.append(end["result"])
                continue
            failed = SpawnedJobFailedError(end["job_id"], end["status"], end["error"])
            if not return_exceptions:
                raise failed
            out.append(failed)
        return out

    return WaitCall(name, "gather", timeout, f"gather {name!r} of {len(ids)} spawned jobs",
                    terms={"jobs": ids, "total": len(ids), "max_bytes": max_bytes},
                    on_timeout={"timed_out": True}, decode=decode)  # fmt: skip
