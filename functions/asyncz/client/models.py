"""Typed models of the API's objects, built from its JSON (no pydantic: the client needs
httpx alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")
TERMINAL = frozenset({"completed", "dead", "cancelled"})


def _when(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the API shows it. ``submit`` fills what it knows (id, status and what was
    sent); ``get`` fills every field. ``duplicate``: a batch item whose key existed."""

    id: str
    status: str
    task: str | None = None
    queue: str | None = None
    priority: int | None = None
    payload: dict[str, Any] | None = None
    result: Any = None
    last_error: str | None = None
    attempts: int = 0
    max_retries: int | None = None
    timeout_seconds: int | None = None
    idempotency_key: str | None = None
    cancel_requested: bool = False
    worker_id: str | None = None
    run_at: datetime | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None
    duplicate: bool = False  # also: a submit whose unique_key another job holds (that job)
    debounced: bool = False  # ... which took this submit's payload and start
    unique_key: str | None = None
    unique_scope: str | None = None
    ref: str | None = None  # its ref in the batch that submitted it (submit_graph)
    open_parents: int = 0  # parents a waiting job still waits for
    depends_on: list[dict[str, Any]] | None = None  # get(): each parent's id, status, rule
    dependents: list[dict[str, Any]] | None = None  # get(): the jobs depending on it
    concurrency_key: str | None = None  # what the task's per-key limits count by
    waiting_for: str | None = None  # get(): why a queued job is held back (a limit, a pause)
    submitted_by: str | None = None  # the name of the API key that submitted it
    spawned_by: str | None = None  # the durable job whose ctx.spawn created it
    spawned: dict[str, Any] | None = None  # get(): a spawner's jobs by status, and where
    # cancel(), replay(), get(): the cascade to its children goes on (the API answered 202;
    # the recovery sweep finishes it)
    cascade_pending: bool = False

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def result_as(self, as_type: type[T]) -> T:
        """``result`` parsed into ``as_type`` (a pydantic model, dataclass, TypedDict…)."""
        from asyncz.client.typed import parse_as

        return parse_as(as_type, self.result)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Job:
        return cls(
            id=str(data.get("job_id") or data.get("id")),
            status=str(data.get("status")),
            task=data.get("task"),
            queue=data.get("queue"),
            priority=data.get("priority"),
            payload=data.get("payload"),
            result=data.get("result"),
            last_error=data.get("last_error"),
            attempts=int(data.get("attempts") or 0),
            max_retries=data.get("max_retries"),
            timeout_seconds=data.get("timeout_seconds"),
            idempotency_key=data.get("idempotency_key"),
            unique_key=data.get("unique_key"),
            unique_scope=data.get("unique_scope"),
            cancel_requested=bool(data.get("cancel_requested")),
            worker_id=data.get("worker_id"),
            run_at=_when(data.get("run_at")),
            created_at=_when(data.get("created_at")),
            started_at=_when(data.get("started_at")),
            finished_at=_when(data.get("finished_at")),
            updated_at=_when(data.get("updated_at")),
            ref=data.get("ref"),
            concurrency_key=data.get("concurrency_key"),
            waiting_for=data.get("waiting_for"),
            open_parents=int(data.get("open_parents") or 0),
            depends_on=data.get("depends_on"),
            dependents=data.get("dependents"),
            submitted_by=data.get("submitted_by"),
            spawned_by=data.get("spawned_by"),
            spawned=data.get("spawned"),
            cascade_pending=bool(data.get("cascade_pending")),
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    attempt: int
    outcome: str | None
    worker_id: str | None
    error: str | None
    duration_ms: int | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(
            attempt=int(data["attempt"]),
            outcome=data.get("outcome"),
            worker_id=data.get("worker_id"),
            error=data.get("error"),
            duration_ms=data.get("duration_ms"),
            started_at=_when(data.get("started_at")),
            finished_at=_when(data.get("finished_at")),
        )


@dataclass(frozen=True, slots=True)
class QueueStats:
    counts: dict[str, int]
    ready: int | None
    delayed: int | None
    oldest_queued_age_seconds: float
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Stats:
    queues: dict[str, QueueStats]
    live_workers: int | None
    limits: list[dict[str, Any]] | None = None  # each limited task: running, waiting, per key
    cost: dict[str, Any] | None = None  # estimated dollars, last hour and day (docs/cost.md)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Stats:
        queues = {
            name: QueueStats(
                counts=dict(q.get("counts") or {}),
                ready=q.get("ready"),
                delayed=q.get("delayed"),
                oldest_queued_age_seconds=float(q.get("oldest_queued_age_seconds") or 0.0),
                paused=bool(q.get("paused")),
            )
            for name, q in (data.get("queues") or {}).items()
        }
        return cls(
            queues=queues,
            live_workers=data.get("live_workers"),
            limits=data.get("limits"),
            cost=data.get("cost"),
        )


@dataclass(frozen=True, slots=True)
class Health:
    status: str
    dependencies: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
