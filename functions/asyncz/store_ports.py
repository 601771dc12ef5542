"""The protocols of the job store's parts (``store.dependencies``, ``.maintenance``,
``.access``, ``.activity``, ``.limits``, ``.unique``, ``.steps``; the waits' parts are in
:mod:`asyncz.wait_ports`): what each concern of the service needs from PostgreSQL, beside
:class:`asyncz.ports.JobStore`. Protocols only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from asyncz.jobs import Lease, NewJob
    from asyncz.port_types import Plan, Row


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


class LimitStore(Protocol):
    """Paused queues in Postgres, and what a limit counted that Redis may lose (see
    :mod:`asyncz.store.limits`)."""

    async def pause_queue(self, queue: str, by: str | None) -> bool:
        """False when it was paused already."""
        ...

    async def resume_queue(self, queue: str) -> bool:
        """False when it was not paused."""
        ...

    async def paused_queues(self) -> dict[str, Row]:
        """``{queue: {"queue", "paused_at", "paused_by"}}``."""
        ...

    async def running_limited(
        self, tasks: Sequence[str], lease_seconds: float, limit: int
    ) -> list[Row]:
        """The running attempts of ``tasks`` whose lease holds: ``id``, ``task``,
        ``concurrency_key``, ``left_ms`` (of the lease)."""
        ...

    async def recent_starts(self, windows: Mapping[str, float], limit: int) -> list[Row]:
        """Per task, its newest ``limit`` attempts started in the last ``windows[task]``
        seconds: ``task``, ``concurrency_key``, ``job_id``, ``attempt``, ``age_ms``."""
        ...


class AccessStore(Protocol):
    """Named API keys (stored as SHA-256) and the audit trail of operator actions (see
    :mod:`asyncz.store.access`). Key rows carry ``name, scopes, rate_limit,
    rate_period_seconds, created_at, expires_at, last_used_at, revoked_at``."""

    async def live_keys(self) -> list[Row]:
        """Keys neither revoked nor expired, with ``key_hash``."""
        ...

    async def find_key(self, key_hash: str) -> Row | None:
        """The live key with this digest, if any (a key a sandbox has not loaded yet)."""
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
        self, *, key_id: str, key_name: str, action: str, target: str | None,
        detail: Mapping[str, Any], outcome: str,
    ) -> Row: ...  # fmt: skip
    async def finish_audit(self, audit_id: int, outcome: str, detail: Mapping[str, Any]) -> None:
        """Set the outcome (and add to the detail) of an action recorded before it ran."""
        ...

    async def list_audit(
        self, *, key_name: str | None, action: str | None, limit: int,
        after: tuple[datetime, int] | None, key_id: str | None = None,
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

    async def settle(self, parent_ids: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        """Apply these finished parents to their waiting children, one page of at most
        ``limit`` unsettled edges (once per edge); the children changed, and whether the
        page was full (more may be left)."""
        ...

    async def reevaluate(self, job_ids: Sequence[str]) -> list[Row]:
        """After a replay: these jobs' edges say again whether each parent has finished, and
        each waiting or queued one of them is re-evaluated; the jobs changed."""
        ...

    async def heal(self, replayed: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        """After a replay, one page: at most ``limit`` dead jobs that ended because of one
        of these (not dead or cancelled again) wait again, flagged ``cascade_pending`` when
        they have children, and are re-evaluated; the jobs changed, and whether the page
        was full."""
        ...

    async def mark_cascades(self, job_ids: Sequence[str]) -> None:
        """Flag these jobs ``cascade_pending`` (the sweep resumes them)."""
        ...

    async def finish_cascades(self, job_ids: Sequence[str]) -> list[str]:
        """Clear the flag of those of these jobs with nothing left to settle or heal."""
        ...

    async def pending_cascades(self, limit: int) -> list[Row]:
        """Flagged jobs (``id``, ``status``), at most ``limit``."""
        ...

    async def scan_waiting(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        """Waiting jobs (``id``, ``created_at``), newest first, after ``after``."""
        ...

    async def stuck_parents(self, child_ids: Sequence[str]) -> list[str]:
        """Finished parents whose end one of these waiting children has not seen."""
        ...

    async def release_orphaned(self, child_ids: Sequence[str]) -> list[Row]:
        """Those of these waiting jobs none of whose parents is live: queued, or ended by
        their rules."""
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
    async def scan_due_suspended(
        self, after: tuple[datetime, str] | None, limit: int
    ) -> list[Row]: ...
    async def prune_finished(self, older_than: float, limit: int) -> int: ...
    async def prune_dead(self, older_than: float, limit: int) -> int: ...
    async def prune_periodic_runs(self, older_than: float) -> None: ...
    async def fold_finished_counts(self, lag_seconds: float) -> int:
        """Fold jobs finished since the last fold into the per-queue counts; how many."""
        ...

    async def last_periodic_runs(self, tasks: Sequence[str]) -> dict[str, Row]: ...
    async def mark_periodic_seen(self, task: str, slot: datetime) -> None: ...
    async def insert_periodic_job(self, job_id: str, slot: datetime, new: NewJob) -> Row | None: ...


class StepStore(Protocol):
    """What durable tasks' steps (:mod:`asyncz.durable`) need from Postgres (see
    :mod:`asyncz.store.steps`)."""

    async def save(self, job_id: str, token: str, step: Row) -> bool:
        """Store a step's outcome in one statement fenced by the lease ``token``; False:
        the lease is lost and nothing was stored."""
        ...

    async def suspend(self, lease: Lease, delay_seconds: float, reason: str) -> Row | None:
        """End the attempt suspended, the job waking ``delay_seconds`` from now, fenced by
        the lease (a cancel requested meanwhile wins); None: the lease is lost."""
        ...

    async def load(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        """One page of the job's stored steps after ``after_seq``, by seq."""
        ...

    async def open_wait(self, job_id: str, token: str, step: Row) -> Row | None:
        """Store a new wait (status 'waiting', ``wait_until``, ``wait_key``, its terms as
        ``result``) fenced by the lease, or complete it at once when its kind finds what it
        waits for already there; the stored ``status`` and ``result``; None: lease lost."""
        ...

    async def resolve(self, job_id: str, seq: int, result: str, size: int) -> Row | None:
        """Complete a waiting step with a value and wake its job (a dispatch row: id,
        status, queue, priority, run_at, due); None: not waiting (first commit wins)."""
        ...

    async def resolve_keyed(self, kind: str, wait_key: str, result: str, size: int,
                            resolver: str | None, after_job: str | None, limit: int
                            ) -> list[Row]:  # fmt: skip
        """A page of the waits of ``kind`` on ``wait_key`` (each job's earliest), resolved as
        :meth:`resolve` does; one row per wait scanned, ``resolved`` saying if it took it."""
        ...

    async def time_out(self, lease: Lease, seq: int, result: str) -> Row | None:
        """Resolve a wait by its timeout, fenced by the lease: ``timed_out`` and the wait's
        ``result`` (a value's, when one came first); None: the lease is lost."""
        ...

    async def callback_key(self) -> bytes:
        """The key callback tokens are derived under (the same in every sandbox)."""
        ...

    async def peek(self, job_id: str, seq: int) -> Row | None:
        """One stored step as it is now: status, result, wait_until."""
        ...

    async def list(self, job_id: str, after_seq: int, limit: int) -> list[Row]:
        """One page of the job's steps for people (no results), by seq."""
        ...

    async def reset(self, job_id: str) -> int:
        """Delete a dead job's steps; how many went (none unless the job is dead)."""
        ...

    async def prune(self, kind: str, older_than: float, jobs: int, limit: int) -> int:
        """Retention: up to ``limit`` step rows of the next ``jobs`` ``kind`` ("finished",
        "dead") jobs older than ``older_than`` seconds."""
        ...
