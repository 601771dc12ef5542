"""What the job service needs from its adapters (store, broker, metrics) and the small
result types it returns. Protocols only: no driver is imported here."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob
from asyncz.tasks.limits import TaskLimits

Row = dict[str, Any]


def epoch_ms(when: datetime | None = None) -> int:
    return int((when.timestamp() if when is not None else time.time()) * 1000)


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
    """One parent of a planned job: its rule, its ref in the batch, whether it has finished."""

    parent_id: str
    on_parent_failure: str
    parent_ref: str | None
    settled: bool


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

    @property
    def member(self) -> str:
        """How a held-back id is kept (to put it back in its queue's ready set)."""
        return f"{self.queue}|{self.priority}|{self.job_id}"


class LimitBroker(Protocol):
    """Fleet-wide limit state in Redis (see :mod:`asyncz.broker.limits`): rebuildable, since
    a lost slot only frees it, and a lost held id is re-enqueued by recovery."""

    async def acquire(self, slots: Sequence[Slot], lease_seconds: float) -> list[str]:
        """Per slot, ``ok`` (taken), or why it was held back: ``concurrency``,
        ``key_concurrency``, ``rate``, ``key_rate`` (the id is kept until it may go)."""
        ...

    async def release(self, slots: Sequence[Slot]) -> int:
        """Give slots back; the oldest ids held for them go back to ready (how many)."""
        ...

    async def refresh(self, slots: Sequence[Slot], lease_seconds: float) -> None: ...
    async def wake_due(self, limit: int = 1000) -> int:
        """Ids held by a rate whose window has opened go back to ready (how many)."""
        ...

    async def held_reason(self, slot: Slot) -> str | None:
        """Which limit holds this queued job back now, if any."""
        ...

    async def usage(self, limited: dict[str, TaskLimits], keys_per_task: int) -> list[Row]:
        """Per task (and per key seen): ``running`` and ``waiting`` counts."""
        ...

    async def mirror_paused(self, queues: set[str]) -> None:
        """The paused queues, copied from Postgres: the fleet's backlog leaves them out."""
        ...

    async def paused(self) -> set[str]: ...


class MetricsSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


class NullMetrics:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


class JobStore(Protocol):
    """What the service needs from Postgres (see :mod:`asyncz.store.postgres`)."""

    async def insert_job(self, job_id: str, new: NewJob) -> Row | None:
        """``{"run_at_ms": int, "due": bool}``; ``None`` when the idempotency key exists."""
        ...

    async def insert_jobs(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        """One statement for a batch; per item, in order: its row, or ``None`` (duplicate)."""
        ...

    async def get_by_idempotency_keys(self, keys: Sequence[str]) -> dict[str, Row]:
        """``{key: {"id", "status", "queue", "priority", "run_at", "due"}}``."""
        ...

    async def get_by_idempotency_key(self, key: str) -> Row | None: ...
    async def find_jobs(self, ids: Sequence[str]) -> dict[str, Row]:
        """``{id: {"id", "status", "queue", "priority", "run_at", "due"}}`` for those that
        exist."""
        ...

    async def get_job(self, job_id: str) -> Job | None: ...
    async def list_attempts(self, job_id: str) -> list[Attempt]: ...
    async def list_jobs(
        self,
        *,
        status: str | None,
        queue: str | None,
        task: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
        submitted_by: str | None = None,
    ) -> list[Job]: ...
    async def list_dead(
        self, *, queue: str | None, task: str | None, limit: int, after: tuple[datetime, str] | None
    ) -> list[Job]: ...
    async def counts_by_status(self) -> list[Row]: ...
    async def oldest_queued_by_queue(self) -> dict[str, float]: ...
    async def gauges(self) -> Row: ...
    async def finished_per_minute(self, minutes: int) -> list[Row]:
        """Per minute of the last ``minutes`` with any activity: ``minute`` (UTC, truncated),
        ``completed`` and ``failed`` attempts, ``dead`` jobs; oldest first."""
        ...

    async def count_dead(self) -> int: ...
    async def ping(self) -> None: ...
    async def claim(self, ids: Sequence[str], worker_id: str, max_timeout: int) -> list[Lease]: ...
    async def unclaimed(self, ids: Sequence[str]) -> list[Row]: ...
    async def heartbeat(self, leases: Sequence[Lease]) -> dict[str, bool]: ...
    async def complete(self, lease: Lease, result: Any) -> bool: ...
    async def complete_many(self, done: Sequence[tuple[Lease, Any]]) -> dict[str, bool]:
        """The ids whose lease held, each with whether the job has dependents to settle."""
        ...

    async def finish_failed(
        self,
        lease: Lease,
        *,
        status: JobStatus,
        outcome: AttemptOutcome,
        error: str,
        delay_seconds: float = 0.0,
    ) -> Row | None: ...
    async def cancel(self, job_id: str) -> Row | None: ...
    async def replay(self, job_id: str) -> Row | None: ...
    async def replay_dead(
        self, *, queue: str | None, task: str | None, limit: int
    ) -> list[Row]: ...
    async def purge_dead(self, job_id: str) -> bool: ...
    async def save_progress(
        self, reports: Sequence[tuple[Lease, float, str | None]]
    ) -> set[str]: ...

    @property
    def dependencies(self) -> DependencyStore:
        """The queries of job dependencies (submit with parents, settle, heal, read)."""
        ...

    @property
    def unique(self) -> UniqueStore:
        """The queries of unique jobs (insert under a held key, read the holders)."""
        ...

    @property
    def maintenance(self) -> MaintenanceStore:
        """The queries of recovery, retention, periodic jobs and count folding."""
        ...

    @property
    def flow(self) -> FlowStore:
        """The queries of flow control (paused queues)."""
        ...

    @property
    def access(self) -> AccessStore:
        """The named API keys and the audit trail."""
        ...

    @property
    def activity(self) -> ActivityStore:
        """Per-task figures of the last hour and the attempts running now."""
        ...


class ActivityStore(Protocol):
    """What the workers view and the per-task figures read (see :mod:`asyncz.store.activity`)."""

    async def task_figures(self, minutes: int) -> list[Row]:
        """Per (task, queue), attempts finished in the last ``minutes``: runs, completed,
        failures, retries, run_p50_ms/run_p95_ms, wait_p50_ms/wait_p95_ms (latest attempts)."""
        ...

    async def running_jobs(self, limit: int) -> list[Row]:
        """The attempts running now: job_id, task, queue, worker_id, attempt, started_at,
        elapsed_seconds, progress, progress_message, heartbeat_at."""
        ...


class FlowStore(Protocol):
    """Paused queues in Postgres (see :mod:`asyncz.store.flow`)."""

    async def pause_queue(self, queue: str, by: str | None) -> bool:
        """False when it was paused already."""
        ...

    async def resume_queue(self, queue: str) -> bool:
        """False when it was not paused."""
        ...

    async def paused_queues(self) -> dict[str, Row]:
        """``{queue: {"queue", "paused_at", "paused_by"}}``."""
        ...


class AccessStore(Protocol):
    """Named API keys (stored as SHA-256) and the audit trail of operator actions (see
    :mod:`asyncz.store.access`). Key rows carry ``name, scopes, rate_limit,
    rate_period_seconds, created_at, expires_at, last_used_at, revoked_at``."""

    async def live_keys(self) -> list[Row]:
        """Keys neither revoked nor expired, with ``key_hash``."""
        ...

    async def list_keys(self, *, revoked: bool) -> list[Row]: ...
    async def create_key(
        self,
        *,
        name: str,
        key_hash: str,
        scopes: Sequence[str],
        rate: tuple[int, int] | None,
        expires_at: datetime | None,
    ) -> Row:
        """Raises KeyNameTakenError when a live key has the name."""
        ...

    async def revoke_key(self, name: str) -> Row | None: ...
    async def touch_keys(self, hashes: Sequence[str]) -> None: ...
    async def insert_audit(
        self, *, key_name: str, action: str, target: str | None, detail: Mapping[str, Any],
        outcome: str,
    ) -> Row: ...  # fmt: skip
    async def finish_audit(self, audit_id: int, outcome: str, detail: Mapping[str, Any]) -> None:
        """Set the outcome (and add to the detail) of an action recorded before it ran."""
        ...

    async def list_audit(
        self, *, key_name: str | None, action: str | None, limit: int,
        after: tuple[datetime, int] | None,
    ) -> list[Row]: ...  # fmt: skip
    async def prune_audit(self, older_than: float, limit: int) -> int: ...


class DependencyStore(Protocol):
    """What job dependencies (:mod:`asyncz.service.dependencies`) need from Postgres (see
    :mod:`asyncz.store.dependencies`). Rows of changed jobs carry ``id, status, queue,
    priority, run_at, due, has_dependents``."""

    async def insert_planned(self, parent_ids: Sequence[str], plan: Plan) -> list[Row]:
        """One transaction: lock the parents, ``plan`` the jobs from them, insert the jobs
        and their edges; per planned job, in order, ``{"id", "run_at_ms", "due"}``. A
        repeated idempotency key raises :class:`asyncz.errors.DuplicateKeyError` and
        stores nothing."""
        ...

    async def settle(self, parent_ids: Sequence[str]) -> list[Row]:
        """Apply these finished parents to their waiting children (once per edge); the
        children changed."""
        ...

    async def heal(self, replayed: Sequence[str]) -> list[Row]:
        """After a replay: the descendants that ended because of these jobs wait again, and
        each of them (and each replayed job with parents) is re-evaluated; the jobs changed."""
        ...

    async def stuck_parents(self, limit: int) -> list[str]:
        """Finished parents whose end a waiting child has not seen (recovery settles them)."""
        ...

    async def release_orphaned(self, limit: int) -> list[Row]:
        """Waiting jobs none of whose parents is live: queued, or ended by their rules."""
        ...

    async def parents(self, child_ids: Sequence[str], *, results: bool) -> list[Row]:
        """Each child's parents: ``child_id, job_id, ref, on_parent_failure, status`` (and
        ``result``, ``last_error`` when ``results``); status ``purged`` for a gone one."""
        ...

    async def dependents(self, job_id: str, limit: int) -> tuple[list[Row], int]:
        """A job's first ``limit`` children (``job_id, status, on_parent_failure``) and
        how many it has."""
        ...

    async def any_waiting(self) -> bool: ...


class UniqueStore(Protocol):
    """What unique jobs (:mod:`asyncz.service.unique`) need from Postgres (see
    :mod:`asyncz.store.unique`)."""

    async def insert(self, job_id: str, new: NewJob) -> Row | None:
        """``{"id", "status", "run_at_ms", "due"}`` of the job inserted, or with ``debounce``
        of the holder changed (another id); ``None`` when the key or idempotency key is held."""
        ...

    async def insert_many(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        """One statement; per item, in order: its row, or ``None`` (a key held)."""
        ...

    async def holders(self, keys: Sequence[str]) -> dict[str, Row]:
        """``{key: {"id", "status", "queue", "priority", "run_at", "due"}}`` of the holders."""
        ...


class MaintenanceStore(Protocol):
    """What maintenance (:mod:`asyncz.maintenance`) needs from Postgres, beside the job store
    (see :mod:`asyncz.store.maintenance`)."""

    async def recover_stale_leases(self, lease_timeout: float, limit: int) -> list[Row]: ...
    async def scan_queued(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]: ...
    async def prune_finished(self, older_than: float, limit: int) -> int: ...
    async def prune_dead(self, older_than: float, limit: int) -> int: ...
    async def prune_periodic_runs(self, older_than: float) -> None: ...
    async def fold_finished_counts(self, lag_seconds: float) -> int:
        """Fold jobs finished since the last fold into the per-queue counts; how many."""
        ...

    async def last_periodic_runs(self, tasks: Sequence[str]) -> dict[str, Row]: ...
    async def mark_periodic_seen(self, task: str, slot: datetime) -> None: ...
    async def insert_periodic_job(self, job_id: str, slot: datetime, new: NewJob) -> Row | None: ...


class JobBroker(Protocol):
    """What the service needs from Redis (see :mod:`asyncz.broker.redis`)."""

    async def enqueue(self, items: Sequence[Dispatch], *, register: bool = False) -> int: ...
    async def reschedule(self, items: Sequence[Dispatch]) -> None:
        """Move ids already enqueued to where they now belong (a debounced job's new start)."""
        ...

    async def live_workers(self) -> int: ...
    async def live_worker_list(self) -> list[dict[str, Any]]:
        """Each live worker: worker_id, since_ms (first registered), expires_ms."""
        ...

    async def try_lock(self, name: str, ttl_seconds: float) -> bool: ...
    async def add_starting(self, count: int, ttl_seconds: float) -> None: ...
    async def starting_workers(self) -> int: ...
    async def worker_started(self) -> None: ...
    async def promote_due(self, queues: Sequence[str], limit: int = 1000) -> int: ...
    async def pop(self, queues: Sequence[str], max_items: int, timeout: float) -> list[str]: ...
    async def known_queues(self) -> list[str]: ...
    async def backlog(self, queues: Sequence[str]) -> dict[str, tuple[int, int]]: ...
    async def register_worker(self, worker_id: str, ttl_seconds: float) -> None: ...
    async def unregister_worker(self, worker_id: str) -> None: ...
    async def scan_position(self) -> str | None: ...
    async def save_scan_position(self, position: str | None) -> None: ...
    # Recovery's idle skip (serverless): an enqueue counter and a note with a TTL.
    async def activity(self) -> int: ...
    async def idle_mark(self) -> str | None: ...
    async def set_idle_mark(self, value: str | None, ttl_seconds: float) -> None: ...
    async def take_request(self, name: str, limit: int, period_seconds: int) -> float:
        """Admit one request of API key ``name`` under ``limit`` per ``period_seconds``
        across every sandbox: 0.0, else the seconds until one would be admitted."""
        ...

    async def ping(self) -> None: ...

    @property
    def limits(self) -> LimitBroker:
        """Flow-control limits (concurrency slots, rate windows, held-back ids)."""
        ...


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
