"""Job states, attempt outcomes and the transitions allowed between states (pure)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class JobStatus(enum.StrEnum):
    WAITING = "waiting"  # for its parents to finish; not in Redis
    QUEUED = "queued"
    PROCESSING = "processing"
    SUSPENDED = "suspended"  # a durable task waits (a sleep) until run_at; holds no lease
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


class AttemptOutcome(enum.StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    SUSPENDED = "suspended"  # a durable task's attempt gave way to a wait: not a try


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})

LIVE = frozenset({JobStatus.WAITING, JobStatus.QUEUED, JobStatus.PROCESSING, JobStatus.SUSPENDED})

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    # last parent done; a parent failed under the `fail` rule, or cancelled
    JobStatus.WAITING: frozenset({JobStatus.QUEUED, JobStatus.DEAD, JobStatus.CANCELLED}),
    JobStatus.QUEUED: frozenset({JobStatus.PROCESSING, JobStatus.CANCELLED}),
    JobStatus.PROCESSING: frozenset(
        {
            JobStatus.COMPLETED,
            JobStatus.QUEUED,
            JobStatus.SUSPENDED,
            JobStatus.DEAD,
            JobStatus.CANCELLED,
        }
    ),
    # woken: claimed again when due (its wake is an attempt, not a try); cancelled at once
    JobStatus.SUSPENDED: frozenset({JobStatus.PROCESSING, JobStatus.CANCELLED}),
    JobStatus.DEAD: frozenset({JobStatus.QUEUED, JobStatus.WAITING}),  # replay (and heal)
    JobStatus.COMPLETED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}

PRIORITY_MIN = -100
PRIORITY_MAX = 100

# Dependency limits (BENCHMARKS.md, "Dependencies"): parents of one job, and how deep a
# graph goes (a failure travels down it one statement per level).
MAX_PARENTS = 1000
MAX_DEPTH = 100
PARENT_FAILED = "parent_failed: "  # last_error of a job ended by a parent's failure


class UniqueScope(enum.StrEnum):
    """How long a job holds its ``unique_key`` (a second submit meanwhile creates nothing)."""

    QUEUED = "queued"  # until its first attempt starts
    QUEUED_OR_RUNNING = "queued_or_running"  # until it finishes (retries included)
    PERIOD = "period"  # for ``unique_for`` seconds from its submit, whatever its status


MAX_UNIQUE_KEY = 200
MAX_UNIQUE_FOR = 365 * 86_400  # seconds
MAX_RETRIES = 20
# A job's text bounds. The API's models say them too; these hold for every way a job is made
# (a spawn, a schedule, the in-process client): the table no longer checks them (0026).
TEXT_BOUNDS = {"queue": 100, "concurrency_key": 200, "unique_key": MAX_UNIQUE_KEY,
               "tracestate": 512}  # fmt: skip
TRACEPARENT_LENGTH = 55
MAX_WAITING_FOR = 500  # a suspended job's reason (its ``waiting_for``), cut to this


def bounds_error(new: NewJob) -> str | None:
    """Why a job (its defaults filled) cannot be stored, or None: what the table's CHECK
    constraints said before 0026, said here once for every path, as a message."""
    for name, most in TEXT_BOUNDS.items():
        value = getattr(new, name)
        if value is not None and not 1 <= len(value) <= most:
            return f"{name} is 1 to {most} characters"
    if new.traceparent is not None and len(new.traceparent) != TRACEPARENT_LENGTH:
        return f"traceparent is {TRACEPARENT_LENGTH} characters (W3C trace context)"
    if not PRIORITY_MIN <= new.priority <= PRIORITY_MAX:
        return f"priority is from {PRIORITY_MIN} to {PRIORITY_MAX}"
    if new.max_retries is not None and not 0 <= new.max_retries <= MAX_RETRIES:
        return f"max_retries is from 0 to {MAX_RETRIES}"
    if new.timeout_seconds is not None and new.timeout_seconds < 1:
        return "timeout_seconds is at least 1"
    return None


class ParentRule(enum.StrEnum):
    """What a waiting job does when this parent ends ``dead`` or ``cancelled``."""

    FAIL = "fail"  # it ends too (dead, or cancelled when the parent was), at once
    RUN = "run"  # it runs anyway; its task sees the parent's status


@dataclass(frozen=True, slots=True)
class Dependency:
    """One parent of a job: its id (or, inside a batch, an earlier item's ref)."""

    job_id: str
    on_parent_failure: ParentRule = ParentRule.FAIL
    ref: str | None = None  # the parent's ref, when it was given as one


def can_transition(src: JobStatus, dst: JobStatus) -> bool:
    """Whether the lifecycle allows ``src`` → ``dst``."""
    return dst in TRANSITIONS[src]


def out_of_retries(attempts: int, max_retries: int) -> bool:
    """True when ``attempts`` already used every try (the first run plus ``max_retries``)."""
    return attempts > max_retries


@dataclass(frozen=True, slots=True)
class NewJob:
    """What a client asks for; validated by the API, completed with defaults by the service."""

    task: str
    payload: dict[str, Any]
    queue: str = "default"
    priority: int = 0
    max_retries: int | None = None  # None: the task's default, else the settings' default
    timeout_seconds: int | None = None
    delay_seconds: float = 0.0
    run_at: datetime | None = None
    idempotency_key: str | None = None
    depends_on: tuple[Dependency, ...] = ()
    ref: str | None = None  # a name other items of the same batch may depend on
    concurrency_key: str | None = None  # the task's per-key limits count by it
    submitted_by: str | None = None  # the name of the API key that submitted it
    submitted_by_key_id: str | None = None  # its id: what the job belongs to
    unique_key: str | None = None  # at most one job holds it within its scope
    unique_scope: UniqueScope | None = None  # set (the default scope) when unique_key is
    unique_for: float | None = None  # seconds, for the PERIOD scope
    debounce: bool = False  # replace the holder's payload and start while it has not started
    traceparent: str | None = None  # W3C trace context the attempts continue (asyncz.tracing)
    tracestate: str | None = None


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    task: str
    payload: dict[str, Any]
    queue: str
    priority: int
    status: JobStatus
    attempts: int
    attempt_base: int
    max_retries: int
    timeout_seconds: int
    idempotency_key: str | None
    run_at: datetime
    lease_token: str | None
    worker_id: str | None
    heartbeat_at: datetime | None
    cancel_requested: bool
    result: Any
    last_error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    progress: float | None = None  # what the task last reported (ctx.progress), 0..1
    progress_message: str | None = None
    open_parents: int = 0  # while waiting: parents not finished yet
    depth: int = 0  # 0 without parents
    has_dependents: bool = False  # some job names it in depends_on
    cascade_pending: bool = False  # its children not all settled (or healed) yet
    concurrency_key: str | None = None
    submitted_by: str | None = None  # the name of the API key that submitted it
    submitted_by_key_id: str | None = None  # its id: what the job belongs to
    unique_key: str | None = None
    unique_scope: str | None = None
    unique_until: datetime | None = None  # a PERIOD job's end of hold (None once passed)
    traceparent: str | None = None  # the submit's W3C trace context
    tracestate: str | None = None
    suspensions: int = 0  # attempts that ended suspended (not tries)
    suspended_for: str | None = None  # while suspended: what it waits for, in words
    spawned_by: str | None = None  # the durable job whose ctx.spawn created it
    spawn_depth: int = 0  # spawners above it (0: submitted from outside)


@dataclass(frozen=True, slots=True)
class Attempt:
    job_id: str
    attempt: int
    worker_id: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: AttemptOutcome | None
    error: str | None
    duration_ms: int | None


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed attempt: the only handle through which a worker may change the job."""

    job_id: str
    token: str
    task: str
    payload: dict[str, Any]
    queue: str
    priority: int
    attempt: int
    attempt_base: int
    max_retries: int
    timeout_seconds: int
    has_parents: bool = False  # the task is given its parents' statuses and results
    concurrency_key: str | None = None
    traceparent: str | None = None  # the submit's trace context (asyncz.tracing)
    tracestate: str | None = None
    suspensions: int = 0  # attempts of this job that ended suspended (since the last replay)

    @property
    def tries_used(self) -> int:
        """Attempts counted against ``max_retries``: those since the last replay, less the
        ones that ended suspended (a wake is not a try)."""
        return self.attempt - self.attempt_base - self.suspensions


@dataclass(slots=True)
class RecoveryReport:
    requeued: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    reenqueued: int = 0
    restored_delayed: int = 0
    released: int = 0  # waiting jobs (and parents) the dependency sweep acted on
    failed: list[str] = field(default_factory=list)  # the steps that failed (the rest ran)


def unstorable(value: Any) -> str | None:
    """Why PostgreSQL's jsonb cannot hold ``value`` (a NUL in a string, NaN or Infinity,
    a type JSON has no form for), or ``None`` when it can. Iterative: any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character (\\u0000), which PostgreSQL cannot store"
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "contains NaN or Infinity, which JSON cannot represent"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            return f"contains a {type(item).__name__}, which JSON cannot represent"
    return None
