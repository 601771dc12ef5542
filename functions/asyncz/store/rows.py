"""Rows of the PostgreSQL adapter as domain objects (jobs, attempts, leases)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob


def utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def job_of(row: Mapping[str, Any]) -> Job:
    return Job(
        id=str(row["id"]),
        task=row["task"],
        payload=row["payload"],
        queue=row["queue"],
        priority=row["priority"],
        status=JobStatus(row["status"]),
        attempts=row["attempts"],
        attempt_base=row["attempt_base"],
        max_retries=row["max_retries"],
        timeout_seconds=row["timeout_seconds"],
        idempotency_key=row["idempotency_key"],
        run_at=row["run_at"].astimezone(UTC),
        lease_token=str(row["lease_token"]) if row["lease_token"] else None,
        worker_id=row["worker_id"],
        heartbeat_at=utc(row["heartbeat_at"]),
        cancel_requested=row["cancel_requested"],
        result=row["result"],
        last_error=row["last_error"],
        created_at=row["created_at"].astimezone(UTC),
        # the job's first start, kept across its suspensions (started_at: the attempt's)
        started_at=utc(row.get("first_started_at") or row["started_at"]),
        finished_at=utc(row["finished_at"]),
        updated_at=row["updated_at"].astimezone(UTC),
        progress=row["progress"],
        progress_message=row["progress_message"],
        open_parents=row["open_parents"],
        depth=row["depth"],
        has_dependents=row["has_dependents"],
        cascade_pending=row.get("cascade_pending", False),
        concurrency_key=row.get("concurrency_key"),
        submitted_by=row["submitted_by"],
        submitted_by_key_id=row.get("submitted_by_key_id"),
        unique_key=row.get("unique_key"),
        unique_scope=row.get("unique_scope"),
        unique_until=utc(row.get("unique_until")),
        traceparent=row.get("traceparent"),
        tracestate=row.get("tracestate"),
        suspensions=row.get("suspensions", 0),
        suspended_for=row.get("suspended_for"),
        spawned_by=str(row["spawned_by"]) if row.get("spawned_by") else None,
        spawn_depth=row.get("spawn_depth", 0),
    )


def new_job_params(job_id: str, new: NewJob) -> dict[str, Any]:
    """A new job's parameters, for a single-row INSERT."""
    return {
        "id": job_id,
        "task": new.task,
        "payload": Jsonb(new.payload),
        "queue": new.queue,
        "priority": new.priority,
        "max_retries": new.max_retries,
        "timeout_seconds": new.timeout_seconds,
        "idempotency_key": new.idempotency_key,
        "run_at": new.run_at,
        "delay_seconds": float(new.delay_seconds),
        "submitted_by": new.submitted_by,
        "submitted_by_key_id": new.submitted_by_key_id,
        "concurrency_key": new.concurrency_key,
        "traceparent": new.traceparent,
        "tracestate": new.tracestate,
    }


def new_job_columns(items: Sequence[tuple[str, NewJob]]) -> dict[str, Any]:
    """New jobs as one array per column, for a multi-row INSERT from ``unnest``."""
    news = [new for _, new in items]
    return {
        "ids": [job_id for job_id, _ in items],
        "tasks": [n.task for n in news],
        "payloads": [Jsonb(n.payload) for n in news],
        "queues": [n.queue for n in news],
        "priorities": [n.priority for n in news],
        "max_retries": [n.max_retries for n in news],
        "timeouts": [n.timeout_seconds for n in news],
        "keys": [n.idempotency_key for n in news],
        "run_ats": [n.run_at for n in news],
        "delays": [float(n.delay_seconds) for n in news],
        "concurrency_keys": [n.concurrency_key for n in news],
        "submitters": [n.submitted_by for n in news],
        "submitter_key_ids": [n.submitted_by_key_id for n in news],
        "traceparents": [n.traceparent for n in news],
        "tracestates": [n.tracestate for n in news],
    }


def attempt_of(row: Mapping[str, Any]) -> Attempt:
    return Attempt(
        job_id=str(row["job_id"]),
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        started_at=row["started_at"].astimezone(UTC),
        finished_at=utc(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]) if row["outcome"] else None,
        error=row["error"],
        duration_ms=row["duration_ms"],
    )


def lease_of(row: Mapping[str, Any]) -> Lease:
    return Lease(
        job_id=str(row["id"]),
        token=str(row["lease_token"]),
        task=row["task"],
        payload=row["payload"],
        queue=row["queue"],
        priority=row["priority"],
        attempt=row["attempts"],
        attempt_base=row["attempt_base"],
        max_retries=row["max_retries"],
        timeout_seconds=row["timeout_seconds"],
        has_parents=row["has_parents"],
        concurrency_key=row["concurrency_key"],
        traceparent=row.get("traceparent"),
        tracestate=row.get("tracestate"),
        suspensions=row.get("suspensions", 0),
    )
