"""The small value types the ports speak in (rows, plans, slots, outcomes): below both
:mod:`asyncz.ports` and :mod:`asyncz.store_ports`, so neither imports the other's types."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.jobs import JobStatus, NewJob
from asyncz.tasks.limits import TaskLimits

Row = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_ms(when: datetime | None = None) -> int:
    """Now, or a due time, in whole milliseconds. A due time rounds up: Redis promotes an id
    once its clock reaches the score, and PostgreSQL's claim must find the row due by then
    (rounded down, a wake or a retry promoted up to 1 ms early was refused, put back, and
    waited for the worker's next look)."""
    if when is None:
        return int(time.time() * 1000)
    micros = (when - _EPOCH) // _MICROSECOND  # exact, as PostgreSQL's ceil(... * 1000)
    return -(-micros // 1000)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One id to put in Redis: in ``ready`` when due, else in ``delayed`` at ``run_at_ms``."""

    job_id: str
    queue: str
    priority: int
    run_at_ms: int
    due: bool
    fair_key: str | None = None  # its concurrency key: ordered fairly among keys when due


@dataclass(frozen=True, slots=True)
class Edge:
    """One parent of a planned job: its rule, its ref in the batch, whether it has finished
    (and how it ended)."""

    parent_id: str
    on_parent_failure: str
    parent_ref: str | None
    settled: bool
    parent_ended: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedJob:
    """One job of a submit with dependencies, as planned under its parents' locks: its
    status (waiting, queued, or ended at once by a failed parent) and its edges."""

    job_id: str
    new: NewJob
    status: JobStatus
    open_parents: int
    depth: int
    has_dependents: bool
    last_error: str | None
    edges: tuple[Edge, ...]


# Given the existing parents found (``{id: {"id", "status", "depth"}}``), the jobs to insert;
# raising refuses the submit (nothing is stored).
Plan = Callable[[dict[str, Row]], list[PlannedJob]]


@dataclass(frozen=True, slots=True)
class Slot:
    """One attempt's place under its task's limits: asked for before the claim, held (and
    renewed with the lease) while it runs, given back however it ends."""

    job_id: str
    token: str
    task: str
    key: str | None  # the job's concurrency_key
    queue: str
    priority: int
    limits: TaskLimits
    wake: bool = False  # a suspended job's wake: its slots count it, its rates do not
    due_ms: int = 0  # when the job fell due (its place in line while held; 0 = now)

    @property
    def member(self) -> str:
        """How a held-back id is kept (to put it back in its queue's ready set)."""
        return f"{self.queue}|{self.priority}|{self.job_id}"


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    """What the service answers for one submitted job."""

    job_id: str
    status: JobStatus
    enqueued: bool  # False when Redis was down: the job is durable, recovery enqueues it
    duplicate: bool = False  # its unique key was held: job_id is the holder, nothing stored
    debounced: bool = False  # ... and the holder took this submit's payload and start


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One item of a batch submit: accepted, or a duplicate carrying the existing job."""

    job_id: str | None  # None only when the existing job was purged meanwhile
    status: str
    duplicate: bool
    enqueued: bool = True
    ref: str | None = None  # the item's ref, when it gave one
    unique: bool = False  # a duplicate because its unique key is held (job_id: the holder)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Any]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class FailOutcome:
    status: JobStatus
    delay_seconds: float


@dataclass(slots=True)
class HeartbeatOutcome:
    lost: set[str] = field(default_factory=set)
    cancel_requested: set[str] = field(default_factory=set)
