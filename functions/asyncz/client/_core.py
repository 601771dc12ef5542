"""What the sync and async clients share: the retry policy, request bodies, batching and
turning replies into models or exceptions. No I/O here."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from asyncz.client.errors import DuplicateJob, JobFailed, error_for
from asyncz.client.models import Job

DEFAULT_API_URL = "http://127.0.0.1:8000"
MAX_BATCH_JOBS = 500  # the API's limit per POST /jobs/batch
# Under the API's default body limit (256 KiB) with room for the envelope.
MAX_BATCH_BYTES = 240 * 1024
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REPLAY_PAGE = 1000  # POST /dlq/replay's largest limit


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt ``n`` waits a random time up to
    ``min(cap, base * 2**n)`` seconds, or longer when the server says ``Retry-After``."""

    retries: int = 3
    base: float = 0.25
    cap: float = 8.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        jittered = random.uniform(0, min(self.cap, self.base * 2**attempt))
        return max(jittered, retry_after or 0.0)


@dataclass(frozen=True, slots=True)
class Call:
    """One API request. ``safe``: it may be sent again even if the first one ran (reads,
    and submits that carry an idempotency key)."""

    method: str
    path: str
    body: Any = None
    params: Mapping[str, Any] | None = None
    safe: bool = True

    def query(self) -> dict[str, Any] | None:
        if not self.params:
            return None
        return {k: v for k, v in self.params.items() if v is not None}


def resolve(base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    url = base_url or os.environ.get("ASYNCZ_API_URL") or DEFAULT_API_URL
    return url.rstrip("/"), api_key if api_key is not None else os.environ.get("ASYNCZ_API_KEY")


def headers(api_key: str | None) -> dict[str, str]:
    out = {"accept": "application/json", "user-agent": "asyncz-client"}
    if api_key:
        out["x-api-key"] = api_key
    return out


def retry_transport(call: Call, exc: httpx.TransportError) -> bool:
    """A request that never left is always safe to send again; one that may have run only
    when ``call.safe``."""
    return call.safe or isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def retry_status(call: Call, status: int) -> bool:
    # 429 (API Gateway's throttle) and 503 (a dependency down before anything was stored)
    # mean the request did not run; 502/504 may hide one that did.
    return status in RETRY_STATUSES and (call.safe or status in (429, 503))


def retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def decode(response: httpx.Response) -> Any:
    """The reply's JSON, or the exception for its error."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise error_for(response.status_code, body, retry_after(response))
    return body


def submit_body(
    task: str,
    payload: Mapping[str, Any] | None,
    *,
    queue: str | None,
    priority: int | None,
    max_retries: int | None,
    timeout_seconds: int | None,
    delay_seconds: float | None,
    run_at: datetime | None,
    idempotency_key: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"task": task, "payload": dict(payload or {})}
    extra = {
        "queue": queue,
        "priority": priority,
        "max_retries": max_retries,
        "timeout_seconds": timeout_seconds,
        "delay_seconds": delay_seconds,
        "run_at": run_at.isoformat() if run_at is not None else None,
        "idempotency_key": idempotency_key,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def with_key(body: Mapping[str, Any], retries: int) -> tuple[dict[str, Any], bool]:
    """The body with an idempotency key (one is generated when the caller gave none and the
    request may be retried), and whether it was generated."""
    out = dict(body)
    if retries > 0 and not out.get("idempotency_key"):
        out["idempotency_key"] = f"asyncz-client-{uuid.uuid4()}"
        return out, True
    return out, False


def submitted(body: Mapping[str, Any], reply: Mapping[str, Any], duplicate: bool = False) -> Job:
    return Job(
        id=str(reply["job_id"]),
        status=str(reply["status"]),
        task=body.get("task") or (body.get("payload") or {}).get("task"),
        queue=body.get("queue", "default"),
        priority=body.get("priority", 0),
        payload=body.get("payload"),
        idempotency_key=body.get("idempotency_key"),
        max_retries=body.get("max_retries"),
        duplicate=duplicate,
    )


def duplicate_of_ours(exc: DuplicateJob, body: Mapping[str, Any]) -> Job:
    """A retried submit whose first try was stored: that job is ours."""
    return submitted(body, {"job_id": exc.job_id, "status": exc.body.get("status", "queued")})


Keyed = tuple[dict[str, Any], bool]  # a body, and whether its idempotency key was generated


def batches(items: Iterable[Keyed], size: int) -> Iterator[list[Keyed]]:
    """Split into batch requests of at most ``size`` jobs and the body limit."""
    size = max(1, min(size, MAX_BATCH_JOBS))
    chunk: list[Keyed] = []
    used = 0
    for body, generated in items:
        n = len(json.dumps(body, separators=(",", ":")).encode()) + 1
        if chunk and (len(chunk) >= size or used + n > MAX_BATCH_BYTES):
            yield chunk
            chunk, used = [], 0
        chunk.append((body, generated))
        used += n
    if chunk:
        yield chunk


def batch_request(chunk: list[Keyed]) -> Call:
    return Call("POST", "/jobs/batch", {"jobs": [body for body, _ in chunk]}, safe=True)


def batch_jobs(chunk: list[Keyed], reply: Mapping[str, Any]) -> list[Job]:
    """One Job per item, in order; an item with a generated key is never a duplicate of
    someone else's job (only of our own retried request)."""
    return [
        submitted(body, item, duplicate=bool(item.get("duplicate")) and not generated)
        for (body, generated), item in zip(chunk, reply["jobs"], strict=True)
    ]


def replay_page(queue: str | None, task: str | None) -> Call:
    body = {"queue": queue, "task": task, "limit": REPLAY_PAGE}
    return Call("POST", "/dlq/replay", {k: v for k, v in body.items() if v is not None}, safe=False)


def poll_delays(first: float = 0.05, factor: float = 1.5, cap: float = 1.0) -> Iterator[float]:
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * factor)


def outcome(job: Job) -> Any:
    """The result of a finished job, or :class:`JobFailed`."""
    if job.status == "completed":
        return job.result
    raise JobFailed(job)
