"""Request and response models of the HTTP API (they generate the OpenAPI schema)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from asyncz.api.routes.jobs_unique import ScopeName, UniqueFields
from asyncz.api.routes.spawns_models import SpawnedOut
from asyncz.jobs import MAX_DEPTH, MAX_PARENTS, PRIORITY_MAX, PRIORITY_MIN, Attempt, Job, unstorable
from asyncz.tracing import trace_id_of

NAME_PATTERN = r"^[A-Za-z0-9_.:\-]{1,100}$"
MAX_DELAY = timedelta(days=365)  # for delay_seconds and run_at alike
StatusName = Literal[
    "waiting", "queued", "processing", "suspended", "completed", "dead", "cancelled"
]
RuleName = Literal["fail", "run"]
REF_PATTERN = r"^[A-Za-z0-9_.:\-]{1,100}$"


class DependencyIn(BaseModel):
    """One parent with its own rule. ``job_id`` is a job's id, or inside a batch an earlier
    item's ``ref``."""

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(min_length=1, max_length=100)
    on_parent_failure: RuleName | None = Field(
        default=None, description="for this parent; the job's `on_parent_failure` otherwise"
    )


class SubmitJob(UniqueFields):
    """A job to run. ``task`` may also be given as ``payload.task`` (the seed's shape)."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$"
    )
    payload: dict[str, Any] = Field(default_factory=dict)
    queue: str = Field(default="default", pattern=NAME_PATTERN)
    priority: int = Field(
        default=0, ge=PRIORITY_MIN, le=PRIORITY_MAX, description="higher runs first"
    )
    max_retries: int | None = Field(default=None, ge=0, le=20)
    timeout_seconds: int | None = Field(default=None, ge=1, le=86_400)
    delay_seconds: float | None = Field(default=None, ge=0, le=MAX_DELAY.total_seconds())
    run_at: datetime | None = Field(default=None, description="ISO 8601 with a time zone")
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="a second submit with the same key returns 409 and the first job's id; "
        "the key lives as long as its job (retention deletes both: ASYNCZ_RETAIN_*_SECONDS)",
    )
    depends_on: list[str | DependencyIn] = Field(
        default_factory=list,
        description=f"parents: job ids (in a batch, also earlier items' refs), at most "
        f"{MAX_PARENTS}, a graph at most {MAX_DEPTH} deep. The job waits (status `waiting`) "
        "until every parent has finished; an unknown id is `422 unknown_dependency`",
    )
    on_parent_failure: RuleName = Field(
        default="fail",
        description="when a parent ends dead or cancelled: `fail` ends this job too, at once "
        "(dead, or cancelled if the parent was; last_error `parent_failed: <parent id>`; "
        "replaying the parent brings it back); `run` runs it anyway",
    )
    concurrency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="what the task's per-key limits count by (e.g. `tenant:42`, a provider "
        "key): at most `key_concurrency` of its jobs run at once, `key_rate` start per period",
    )
    ref: str | None = Field(
        default=None,
        pattern=REF_PATTERN,
        description="POST /jobs/batch only: a name, unique in the batch, that later items' "
        "`depends_on` may use; the task sees its parents by id and by ref",
    )

    traceparent: str | None = Field(
        default=None,
        pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
        description="W3C trace context the job's attempts continue (else the request's "
        "`traceparent` or `X-Amzn-Trace-Id` header): useful for a batch of jobs from "
        "different traces",
    )
    tracestate: str | None = Field(default=None, max_length=512, pattern=r"^[\x20-\x7e]*$")

    @field_validator("payload")
    @classmethod
    def _storable_payload(cls, payload: dict[str, Any]) -> dict[str, Any]:
        problem = unstorable(payload)
        if problem:
            raise PydanticCustomError("invalid_payload", "payload {problem}", {"problem": problem})
        return payload

    @field_validator("idempotency_key", "unique_key")
    @classmethod
    def _no_nul_in_key(cls, key: str | None) -> str | None:
        if key is not None and "\x00" in key:
            raise PydanticCustomError("invalid_key", "the key contains a NUL character")
        return key

    @model_validator(mode="after")
    def _one_schedule(self) -> SubmitJob:
        if self.delay_seconds is not None and self.run_at is not None:
            raise ValueError("give delay_seconds or run_at, not both")
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise ValueError("run_at needs a time zone (for example 2026-01-01T00:00:00Z)")
        if self.run_at is not None and self.run_at > datetime.now(UTC) + MAX_DELAY:
            raise ValueError("run_at is more than 365 days ahead")
        return self


class Submitted(BaseModel):
    job_id: str
    status: StatusName = Field(
        description="`queued`; `waiting` for its parents; or ended at once by a parent that "
        "had failed (`dead`/`cancelled`, see the job's last_error)"
    )
    duplicate: bool | None = Field(
        default=None, description="200: the unique key is held by `job_id`; nothing stored"
    )
    debounced: bool | None = Field(default=None, description="200: it took this payload/start")


class SubmitBatch(BaseModel):
    """Up to 500 jobs (and the body size limit) in one request, each a ``POST /jobs`` body;
    up to 1,002 when items name earlier items' ``ref`` in ``depends_on`` (a whole graph,
    stored whole or not at all)."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[SubmitJob] = Field(min_length=1, max_length=MAX_PARENTS + 2)


class BatchResult(BaseModel):
    job_id: str | None = Field(description="the new job, or the existing one if duplicate")
    status: str
    duplicate: bool = Field(
        description="the idempotency key exists, or the unique key is held (by a job or an "
        "earlier item): nothing was stored"
    )
    ref: str | None = None
    unique: bool | None = Field(default=None, description="a duplicate of a held unique key")


class BatchSubmitted(BaseModel):
    jobs: list[BatchResult] = Field(description="one per submitted job, in order")
    accepted: int
    duplicates: int
    refs: dict[str, str] = Field(
        default_factory=dict, description="each item's ref, mapped to its job id"
    )


class ParentOut(BaseModel):
    job_id: str
    status: str = Field(description="the parent's status (`purged` once it is gone)")
    on_parent_failure: RuleName
    ref: str | None = None


class ChildOut(BaseModel):
    job_id: str
    status: StatusName
    on_parent_failure: RuleName


class ErrorOut(BaseModel):
    error: str = Field(description="machine-readable code")
    message: str = Field(description="for people")
    details: list[dict[str, Any]] | None = None
    job_id: str | None = None
    status: str | None = None
    index: int | None = Field(default=None, description="the batch item at fault")
    max_bytes: int | None = Field(default=None, description="413: the body limit in bytes")


class JobOut(BaseModel):
    job_id: str
    task: str
    queue: str
    priority: int
    status: StatusName
    attempts: int
    max_retries: int
    timeout_seconds: int
    payload: dict[str, Any]
    result: Any = None
    last_error: str | None
    idempotency_key: str | None
    unique_key: str | None = None
    unique_scope: ScopeName | None = None
    unique_until: datetime | None = Field(default=None, description="`period`: held until")
    cancel_requested: bool
    worker_id: str | None
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    heartbeat_at: datetime | None
    progress: float | None = Field(default=None, description="the task's last report, 0 to 1")
    progress_message: str | None = None
    open_parents: int = Field(default=0, description="parents a waiting job still waits for")
    concurrency_key: str | None = None
    trace_id: str | None = Field(
        default=None, description="the trace its submit carried (W3C trace id, 32 hex)"
    )
    waiting_for: str | None = Field(
        default=None,
        description="GET /jobs/{id}: why a queued job is held back (a limit, a paused queue), "
        "or what a suspended job waits for (a sleep, until its run_at)",
    )
    depends_on: list[ParentOut] | None = Field(
        default=None, description="GET /jobs/{id}: the parents, each with its status"
    )
    dependents: list[ChildOut] | None = Field(
        default=None,
        description="GET /jobs/{id}: the jobs that depend on this one (the first 1,000)",
    )
    dependents_total: int | None = None
    spawned_by: str | None = Field(default=None, description="the durable job that spawned it")
    spawned: SpawnedOut | None = Field(default=None, description="GET /jobs/{id}: its spawns")
    cascade_pending: bool = Field(
        default=False,
        description="its children are not all settled yet (a cancel's cascade, a replay's "
        "heal, or a finished parent's release): the recovery sweep finishes it",
    )
    submitted_by: str | None = Field(
        default=None, description="the name of the API key that submitted it"
    )
    submitted_by_key_id: str | None = Field(
        default=None, description="the id of that key (a later key may be given its name)"
    )

    @classmethod
    def of(cls, job: Job, graph: dict[str, Any] | None = None) -> JobOut:
        return cls(
            job_id=job.id,
            task=job.task,
            queue=job.queue,
            priority=job.priority,
            status=job.status.value,
            attempts=job.attempts,
            max_retries=job.max_retries,
            timeout_seconds=job.timeout_seconds,
            payload=job.payload,
            result=job.result,
            last_error=job.last_error,
            idempotency_key=job.idempotency_key,
            unique_key=job.unique_key,
            unique_scope=job.unique_scope,  # type: ignore[arg-type]  # the column's check
            unique_until=job.unique_until,
            cancel_requested=job.cancel_requested,
            worker_id=job.worker_id,
            run_at=job.run_at,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            updated_at=job.updated_at,
            heartbeat_at=job.heartbeat_at,
            progress=job.progress,
            progress_message=job.progress_message,
            open_parents=job.open_parents if job.status == "waiting" else 0,
            cascade_pending=job.cascade_pending,
            concurrency_key=job.concurrency_key,
            submitted_by=job.submitted_by,
            submitted_by_key_id=job.submitted_by_key_id,
            trace_id=trace_id_of(job.traceparent),
            spawned_by=job.spawned_by,
            **(graph or {}),
        )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class AttemptOut(BaseModel):
    attempt: int
    worker_id: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: Literal["completed", "failed", "timed_out", "lost", "cancelled", "suspended"] | None
    error: str | None
    duration_ms: int | None

    @classmethod
    def of(cls, a: Attempt) -> AttemptOut:
        return cls(
            attempt=a.attempt,
            worker_id=a.worker_id,
            started_at=a.started_at,
            finished_at=a.finished_at,
            outcome=a.outcome.value if a.outcome else None,
            error=a.error,
            duration_ms=a.duration_ms,
        )


class AttemptList(BaseModel):
    job_id: str
    items: list[AttemptOut]


class JobState(BaseModel):
    job_id: str
    status: StatusName
    cancel_requested: bool = False
    cascade_pending: bool = Field(
        default=False,
        description="the cascade to the job's children (cancel's, replay's heal) is still "
        "going on: answered with 202, and finished by the recovery sweep",
    )


class BulkReplay(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queue: str | None = Field(default=None, pattern=NAME_PATTERN)
    task: str | None = Field(default=None, min_length=1, max_length=200)
    limit: int = Field(default=100, ge=1, le=1000)


class ReplayOne(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reset_steps: bool = False  # a durable job's stored steps go first: its task starts over


class BulkReplayed(BaseModel):
    replayed: int
    job_ids: list[str]
