"""What the job service needs from its adapters (store, broker, metrics); the small types
they speak in are in :mod:`asyncz.port_types`. Protocols only: no driver is imported here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob
from asyncz.port_types import Dispatch, Row, Slot
from asyncz.tasks.limits import Counted, TaskLimits

if TYPE_CHECKING:  # the store's parts, beside it (asyncz.store_ports)
    from asyncz.outbox.ports import OutboxStore
    from asyncz.store_ports import (
        AccessStore,
        ActivityStore,
        DependencyStore,
        LimitStore,
        MaintenanceStore,
        StepStore,
        UniqueStore,
    )
    from asyncz.wait_ports import CallbackStore, EventStore, SpawnStore
    from asyncz.webhook_ports import WebhookStore


class LimitBroker(Protocol):
    """Fleet-wide limit state in Redis (see :mod:`asyncz.broker.limits`): rebuildable, since
    a lost slot only frees it, and a lost held id is re-enqueued by recovery."""

    async def acquire(self, slots: Sequence[Slot], lease_seconds: float) -> list[str]:
        """Per slot, ``ok`` (taken), or why it was held back: ``concurrency``,
        ``key_concurrency``, ``rate``, ``key_rate`` (the id is kept until it may go); or
        ``lost`` for all when the state was lost and not rebuilt yet (nothing is kept)."""
        ...

    async def release(self, slots: Sequence[Slot], *, ran: bool = True) -> int:
        """Give slots back (``ran``: their attempts ran, so a rebuilt slot of the same job
        goes too); the oldest ids held for them go back to ready (how many)."""
        ...

    async def refresh(
        self, slots: Sequence[Slot], lease_seconds: float, *, rebuilt: bool = True
    ) -> None:
        """Renew (or put back) the slots of attempts whose leases Postgres just renewed
        (``rebuilt``: each takes the place of the slot a rebuild put back for its job), or
        of threads that outlived their attempts (``rebuilt=False``)."""
        ...

    async def restore(self, counted: Sequence[Counted]) -> None:
        """Put back what the limits counted, read from Postgres; the state is rebuilt."""
        ...

    async def needs_rebuild(self) -> bool:
        """The state was lost (a flush, a failover) and not rebuilt since."""
        ...

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
    # submitted_by: a key's name (every key that held it); submitted_by_key_id: one key
    async def list_jobs(
        self, *, status: str | None, queue: str | None, task: str | None, limit: int,
        after: tuple[datetime, str] | None, submitted_by: str | None = None,
        submitted_by_key_id: str | None = None,
    ) -> list[Job]: ...  # fmt: skip
    async def list_dead(
        self, *, queue: str | None, task: str | None, limit: int, after: tuple[datetime, str] | None
    ) -> list[Job]: ...
    async def counts_by_status(self) -> list[Row]: ...
    async def oldest_queued_by_queue(self, queues: Sequence[str]) -> dict[str, float]:
        """The age in seconds of each of ``queues``' oldest due queued job (a queue with
        none is left out)."""

    async def gauges(self) -> Row: ...
    async def finished_per_minute(self, minutes: int) -> list[Row]:
        """Per minute of the last ``minutes`` with any activity: ``minute`` (UTC, truncated),
        ``completed`` and ``failed`` attempts, ``dead`` jobs; oldest first."""
        ...

    async def count_dead(self) -> int: ...
    async def cost_counts(self) -> list[Row]:
        """For ``label`` "hour" then "day": ``jobs`` created, submit ``requests`` (a batch is
        one), finished ``attempts`` and their run time in ``attempt_seconds``."""
        ...

    async def ping(self) -> None: ...
    async def claim(
        self, ids: Sequence[str], worker_id: str, max_timeout: int, nonce: str | None = None
    ) -> list[Lease]:
        """Claim these ids in one fenced statement; each lease token is derived from the
        claim's secret ``nonce`` (random when none is given) and the id."""
        ...

    async def adopt(self, ids: Sequence[str], nonce: str) -> list[Lease]:
        """After a claim whose answer was lost: the leases it took, if it committed."""
        ...

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
    def steps(self) -> StepStore:
        """The queries of durable tasks' steps (the fenced write, history, listing)."""
        ...

    @property
    def events(self) -> EventStore:
        """The queries of events (a delivery to the waits on it, retention)."""
        ...

    @property
    def callbacks(self) -> CallbackStore:
        """The queries of durable tasks' callbacks (by token hash, heartbeat, the key)."""
        ...

    @property
    def spawns(self) -> SpawnStore:
        """The queries of spawned jobs (the fenced spawn, a cancel's cascade, reads)."""
        ...

    @property
    def outbox(self) -> OutboxStore:
        """The outbox of lifecycle events (the publisher's pages, gauges, retention)."""
        ...

    @property
    def maintenance(self) -> MaintenanceStore:
        """The queries of recovery, retention, periodic jobs and count folding."""
        ...

    @property
    def limits(self) -> LimitStore:
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

    @property
    def webhooks(self) -> WebhookStore:
        """Webhooks, their deliveries and attempts."""
        ...


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
    async def unlock(self, name: str) -> None:
        """Release a :meth:`try_lock` lock before it expires."""
        ...

    async def lock_held(self, name: str) -> bool:
        """Whether someone holds a :meth:`try_lock` lock now."""
        ...

    async def add_starting(self, count: int, ttl_seconds: float) -> None: ...
    async def starting_workers(self) -> int: ...
    async def worker_started(self) -> None: ...
    async def promote_due(self, queues: Sequence[str], limit: int = 1000) -> int: ...
    async def next_due(self, queues: Sequence[str]) -> int | None:
        """When the earliest delayed id of these queues falls due (epoch ms; may be past),
        or None when their delayed sets are empty."""
        ...

    async def pop(self, queues: Sequence[str], max_items: int, timeout: float) -> list[str]: ...
    async def known_queues(self) -> list[str]: ...
    async def backlog(self, queues: Sequence[str]) -> dict[str, tuple[int, int]]: ...
    async def register_worker(self, worker_id: str, ttl_seconds: float) -> None: ...
    async def unregister_worker(self, worker_id: str) -> None: ...
    # Where recovery's walks stopped last time (``scan``: "queued" or "waiting").
    async def scan_position(self, scan: str = "queued") -> str | None: ...
    async def save_scan_position(self, position: str | None, scan: str = "queued") -> None: ...
    # Recovery's idle skip (serverless): an enqueue counter and a note with a TTL.
    async def activity(self) -> int: ...
    async def idle_mark(self) -> str | None: ...
    async def set_idle_mark(self, value: str | None, ttl_seconds: float) -> None: ...
    async def take_request(self, key_id: str, limit: int, period_seconds: int) -> float:
        """Admit one request of API key ``key_id`` (not its name) under ``limit`` per
        ``period_seconds`` across every sandbox: 0.0, else the seconds until admitted."""
        ...

    async def ping(self) -> None: ...

    @property
    def limits(self) -> LimitBroker:
        """Flow-control limits (concurrency slots, rate windows, held-back ids)."""
        ...
