"""Rows of the PostgreSQL adapter as domain objects (jobs, attempts, leases)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from asyncz.errors import InvalidInputError
from asyncz.jobs import Attempt, AttemptOutcome, Job, JobStatus, Lease, NewJob

STRICT_JSON = json.JSONEncoder(allow_nan=False)  # made once (json.dumps makes one a call)


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


def new_job_fields(job_id: str, new: NewJob) -> dict[str, Any]:
    """A new job's columns by name, its payload as it is."""
    return {
        "id": job_id,
        "task": new.task,
        "payload": new.payload,
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


def new_job_params(job_id: str, new: NewJob) -> dict[str, Any]:
    """A new job's parameters, for a single-row INSERT."""
    params = new_job_fields(job_id, new)
    params["payload"] = Jsonb(new.payload)
    return params


def new_jobs_document(
    items: Sequence[tuple[str, NewJob]], more: Sequence[Mapping[str, Any]] = ()
) -> str:
    """New jobs as one JSON array of their columns (``more``: each item's further columns),
    for a multi-row INSERT from ``json_to_recordset``: one encode in C for the batch, where
    an array per column cost psycopg about as much to adapt as the rest of a submit's
    Python (BENCHMARKS.md, "Measured reasons")."""
    rows = [new_job_fields(job_id, new) for job_id, new in items]
    for row, extra in zip(rows, more, strict=False):
        row.update(extra)
    for row in rows:
        if row["run_at"] is not None:
            row["run_at"] = row["run_at"].isoformat()
    try:
        return STRICT_JSON.encode(rows)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"a payload is not storable as JSON: {exc}") from None


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
