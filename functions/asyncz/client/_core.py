"""What the sync and async clients share: the retry policy, request bodies, batching and
turning replies into models or exceptions. No I/O here."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from asyncz.client.errors import (
    ApiError,
    AsyncZClientError,
    DuplicateJob,
    InvalidInput,
    InvalidState,
    JobFailed,
    NotFound,
    error_for,
)
from asyncz.client.models import Job

MAX_BATCH_JOBS = 500  # the API's limit per POST /jobs/batch
MAX_GRAPH_JOBS = 1002  # ... when its items depend on each other's refs
# Under the API's default body limit (256 KiB) with room for the envelope; a smaller limit
# is learned from the first 413 (its max_bytes).
MAX_BATCH_BYTES = 240 * 1024
BATCH_ENVELOPE = 1024  # room kept for {"jobs": [...]} around the items
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REPLAY_PAGE = 1000  # POST /dlq/replay's largest limit
# what a replayed job may be by a 2nd try
REPLAYED = ("queued", "processing", "suspended", "completed")


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


def headers(api_key: str | None) -> dict[str, str]:
    out = {"accept": "application/json", "user-agent": "asyncz-client"}
    if api_key:
        out["x-api-key"] = api_key
    return out


def never_left(exc: httpx.TransportError) -> bool:
    """The request never reached the server (nothing can have run)."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def retry_transport(call: Call, exc: httpx.TransportError) -> bool:
    """A request that never left is always safe to send again; one that may have run only
    when ``call.safe``."""
    return call.safe or never_left(exc)


def error_code(response: httpx.Response) -> str | None:
    """The ``error`` of a JSON error reply, if any."""
    try:
        body = response.json()
    except ValueError:
        return None
    return str(body.get("error")) if isinstance(body, dict) and body.get("error") else None


def uncertain(response: httpx.Response) -> bool:
    """An answer that leaves open whether the request was carried out: a gateway's 502/504,
    or the API's ``503 outcome_unknown``."""
    status = response.status_code
    return status in (502, 504) or (status == 503 and error_code(response) == "outcome_unknown")


def retry_status(call: Call, response: httpx.Response) -> bool:
    # 429 (a throttle) and a plain 503 (a dependency down before anything was stored) mean
    # the request did not run; 502/504 and 503 outcome_unknown may hide one that did. A
    # query the database gave up on (504 query_timeout) would only give up again.
    status = response.status_code
    if status not in RETRY_STATUSES or error_code(response) == "query_timeout":
        return False
    return call.safe or (not uncertain(response) and status in (429, 503))


def retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def decode(response: httpx.Response, after_uncertain: bool = False) -> Any:
    """The reply's JSON, or the exception for its error. ``after_uncertain``: an earlier
    try of this request may have been carried out (the error may be about our own change)."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if response.status_code >= 400:
        exc = error_for(response.status_code, body, retry_after(response))
        exc.after_uncertain_try = after_uncertain
        raise exc
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
    depends_on: Sequence[str | Mapping[str, Any]] | None = None,
    on_parent_failure: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"task": task, "payload": dict(payload or {})}
    if depends_on:
        body["depends_on"] = [d if isinstance(d, str) else dict(d) for d in depends_on]
    extra = {
        "queue": queue,
        "priority": priority,
        "max_retries": max_retries,
        "timeout_seconds": timeout_seconds,
        "delay_seconds": delay_seconds,
        "run_at": run_at.isoformat() if run_at is not None else None,
        "idempotency_key": idempotency_key,
        "on_parent_failure": on_parent_failure,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def already_done(exc: ApiError, done: tuple[str, ...]) -> bool:
    """An operator action refused on a second try because the first one did it: 409 with a
    status in ``done`` (or 404 for a purge, ``done`` = ``("purged",)``)."""
    if not exc.after_uncertain_try:
        return False
    if isinstance(exc, NotFound):
        return "purged" in done
    return isinstance(exc, InvalidState) and exc.job_status in done


def with_key(body: Mapping[str, Any], retries: int) -> tuple[dict[str, Any], bool]:
    """The body with an idempotency key (one is generated when the caller gave none and the
    request may be retried), and whether it was generated."""
    out = dict(body)
    if retries > 0 and not out.get("idempotency_key"):
        out["idempotency_key"] = f"asyncz-client-{uuid.uuid4()}"
        return out, True
    return out, False


def submitted(body: Mapping[str, Any], reply: Mapping[str, Any], duplicate: bool = False) -> Job:
    # a null id: the job holding the key was purged twice while the API looked (resubmit)
    return Job(
        id=str(reply["job_id"]) if reply.get("job_id") is not None else "unknown",
        status=str(reply["status"]),
        task=body.get("task") or (body.get("payload") or {}).get("task"),
        queue=body.get("queue", "default"),
        priority=body.get("priority", 0),
        payload=body.get("payload"),
        idempotency_key=body.get("idempotency_key"),
        max_retries=body.get("max_retries"),
        duplicate=duplicate,
        ref=body.get("ref"),
        concurrency_key=body.get("concurrency_key"),
    )


def duplicate_of_ours(exc: DuplicateJob, body: Mapping[str, Any]) -> Job:
    """A retried submit whose first try was stored: that job is ours."""
    return submitted(body, {"job_id": exc.job_id, "status": exc.body.get("status", "queued")})


Keyed = tuple[dict[str, Any], bool]  # a body, and whether its idempotency key is derived
MAX_CALL_KEY = 180  # an item's key is "<call key>:<n>", at most 200 characters


def call_key(given: str | None) -> str:
    if given is None:
        return f"asyncz-call-{uuid.uuid4()}"
    if not 1 <= len(given) <= MAX_CALL_KEY or "\x00" in given:
        raise ValueError(f"call_key is 1 to {MAX_CALL_KEY} characters, no NUL")
    return given


class BatchPlan:
    """How ``submit_many`` sends its items: each item gets an idempotency key derived from
    the call key unless it has its own (so a second call with the same call key submits
    nothing twice), items go out in batches under the count and byte limits, and a ``413``
    that names the server's limit (``max_bytes``) shrinks the byte budget and splits the
    batch again. No I/O: the sync and async clients drive it."""

    def __init__(
        self,
        items: Iterable[Mapping[str, Any]],
        key: str,
        size: int,
        max_bytes: int,
        *,
        caller_key: bool,
    ) -> None:
        self.call_key = key
        self.size = max(1, min(size, MAX_BATCH_JOBS))
        self.max_bytes = max_bytes
        self.jobs: list[Job] = []
        self._caller_key = caller_key
        self._items = iter(enumerate(items))
        self._pending: list[Keyed] = []

    def _keyed(self, n: int, item: Mapping[str, Any]) -> Keyed:
        body = dict(item)
        if body.get("idempotency_key"):
            return body, False
        body["idempotency_key"] = f"{self.call_key}:{n}"
        return body, True

    def _next(self) -> Keyed | None:
        if self._pending:
            return self._pending.pop(0)
        for n, item in self._items:
            return self._keyed(n, item)
        return None

    def __iter__(self) -> Iterator[list[Keyed]]:
        while True:
            chunk: list[Keyed] = []
            used = 0
            while len(chunk) < self.size and (keyed := self._next()) is not None:
                n = len(json.dumps(keyed[0], separators=(",", ":")).encode()) + 1
                if chunk and used + n > self.max_bytes:
                    self._pending.insert(0, keyed)
                    break
                chunk.append(keyed)
                used += n
            if not chunk:
                return
            yield chunk

    def accept(self, chunk: list[Keyed], reply: Mapping[str, Any]) -> list[Job]:
        """Record a batch's jobs, in order. An item with a derived key is a duplicate only
        of our own earlier try, or of an earlier call with the caller's call key."""
        jobs = [
            submitted(body, item, duplicate=bool(item.get("duplicate"))
                      and (not derived or self._caller_key or bool(item.get("unique"))))
            for (body, derived), item in zip(chunk, reply["jobs"], strict=True)
        ]  # fmt: skip
        self.jobs += jobs
        return jobs

    def shrink(self, chunk: list[Keyed], exc: ApiError) -> bool:
        """After a ``413``: learn the server's limit and send the batch's items again in
        smaller batches (True), or give up when one item alone is over it (False)."""
        limit = exc.body.get("max_bytes")
        if len(chunk) == 1 or not isinstance(limit, int) or limit <= BATCH_ENVELOPE:
            return False
        learned = min(self.max_bytes, limit - BATCH_ENVELOPE)
        self.max_bytes = learned if learned < self.max_bytes else self.max_bytes // 2
        self._pending[:0] = chunk
        return True

    def incomplete(self, exc: AsyncZClientError) -> None:
        """Give the error that stops the call the jobs accepted so far and the call key
        (and, for a ``422``, the index of the item at fault in the whole call)."""
        exc.submitted = list(self.jobs)
        exc.call_key = self.call_key
        if isinstance(exc, InvalidInput) and exc.index is not None:
            exc.body["index"] = len(self.jobs) + exc.index


def graph_request(items: Iterable[Mapping[str, Any]], key: str) -> tuple[list[Keyed], Call]:
    """A graph (items naming each other's ``ref``) in one ``POST /jobs/batch``: it cannot be
    split. Each item without a key gets one derived from ``key``, so the same call again
    answers with the graph stored the first time."""
    chunk = [
        (dict(item), False) if item.get("idempotency_key")
        else ({**item, "idempotency_key": f"{key}:{n}"}, True)
        for n, item in enumerate(items)
    ]  # fmt: skip
    if len(chunk) > MAX_GRAPH_JOBS:
        raise ValueError(f"a graph is submitted in one batch of at most {MAX_GRAPH_JOBS} jobs")
    return chunk, batch_request(chunk)


def graph_jobs(chunk: list[Keyed], reply: Mapping[str, Any]) -> list[Job]:
    return [
        submitted(body, item, duplicate=bool(item.get("duplicate")) and not derived)
        for (body, derived), item in zip(chunk, reply["jobs"], strict=True)
    ]


def batch_request(chunk: list[Keyed]) -> Call:
    return Call("POST", "/jobs/batch", {"jobs": [body for body, _ in chunk]}, safe=True)


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
