"""The asyncio client: :class:`AsyncClient`, the same methods as :class:`Client` awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, overload
from urllib.parse import quote

import httpx

from asyncz.client import _core, endpoint, typed
from asyncz.client._core import Call, RetryPolicy
from asyncz.client.access import AsyncOpsClient
from asyncz.client.errors import (
    AsyncZClientError,
    ConnectionFailed,
    DuplicateJob,
    InvalidState,
    NotFound,
    PayloadTooLarge,
    Unavailable,
    WaitTimeout,
)
from asyncz.client.events import SentEvent, send_event_call
from asyncz.client.limits import with_concurrency_key
from asyncz.client.models import Attempt, Health, Job, Stats
from asyncz.client.steps import Step, all_steps_async, replay_call
from asyncz.client.trace_context import send_trace_context_async
from asyncz.client.typed import Payload, TaskInfo, TaskRef, parse_as, payload_json, task_infos
from asyncz.client.unique import answered, unique_fields

T = TypeVar("T")


class AsyncClient:
    """The AsyncZ API from asyncio code; see :class:`asyncz.client.Client`. Use it as an
    async context manager (or ``await close()``); safe to share between tasks."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url, self.api_key = endpoint.resolve(base_url, api_key)
        self.retry = RetryPolicy(retries=retries)
        self._batch_bytes = _core.MAX_BATCH_BYTES  # lowered by a 413 that names the limit
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=_core.headers(self.api_key),
            timeout=timeout,
            transport=transport,
            event_hooks={"request": [send_trace_context_async]},
        )
        # operator calls: keys, audit, workers, task figures, pause (client.ops.create_key(...))
        self.ops = AsyncOpsClient(self._json)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> tuple[httpx.Response, bool]:
        """The response, after retries, and whether an earlier try may have been carried out
        (its answer lost: a connection error after sending, a 502/504, a 503 outcome_unknown)."""
        attempt, uncertain = 0, False
        while True:
            try:
                response = await self._http.request(
                    call.method, call.path, json=call.body, params=call.query()
                )
            except httpx.TransportError as exc:
                if attempt < self.retry.retries and _core.retry_transport(call, exc):
                    uncertain = uncertain or not _core.never_left(exc)
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise ConnectionFailed(f"cannot reach the API at {self.base_url}: {exc}") from exc
            if attempt < self.retry.retries and _core.retry_status(call, response):
                uncertain = uncertain or _core.uncertain(response)
                await asyncio.sleep(self.retry.delay(attempt, _core.retry_after(response)))
                attempt += 1
                continue
            return response, uncertain

    async def _json(self, call: Call) -> Any:
        return _core.decode(*(await self._send(call)))

    # --- submit --------------------------------------------------------------------------

    async def submit(
        self,
        task: TaskRef,
        payload: Payload = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_retries: int | None = None,
        timeout_seconds: int | None = None,
        delay_seconds: float | None = None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        depends_on: Sequence[str | Mapping[str, Any]] | None = None,
        on_parent_failure: str | None = None,
        unique_key: str | None = None,
        unique_scope: str | None = None,
        unique_for: int | None = None,
        debounce: bool = False,
        concurrency_key: str | None = None,
    ) -> Job:
        """Submit one job. Raises :class:`DuplicateJob` when your ``idempotency_key`` exists
        (not when it is our own earlier try of this call that stored it: that job is
        returned). ``depends_on``: job ids it waits for (status ``waiting``), each a string
        or ``{"job_id": ..., "on_parent_failure": "run"}``; ``on_parent_failure``: ``fail``
        (the default) or ``run``. ``unique_key``: when a job holds it (``unique_scope``
        ``queued``, ``queued_or_running`` or ``period`` with ``unique_for`` seconds), that
        job is returned with ``duplicate=True`` (``debounce``: it takes this payload and
        start while it has not started, when it is of the same task and API key); when
        another API key's job holds it, :class:`UniqueKeyHeld` is raised.
        ``concurrency_key``: what the task's per-key limits count by. Both:
        docs/flow-control.md. ``task``: its name or its ``@task`` function; ``payload``: a
        dict, a pydantic model or a dataclass."""
        body, generated = _core.with_key(
            with_concurrency_key(
                _core.submit_body(typed.task_name(task), payload_json(payload), queue=queue,
                                  priority=priority, max_retries=max_retries,
                                  timeout_seconds=timeout_seconds,
                                  delay_seconds=delay_seconds, run_at=run_at,
                                  idempotency_key=idempotency_key, depends_on=depends_on,
                                  on_parent_failure=on_parent_failure)
                | unique_fields(unique_key, unique_scope, unique_for, debounce),
                concurrency_key,
            ),
            self.retry.retries,
        )  # fmt: skip
        keyed = bool(body.get("idempotency_key"))  # a key makes a second try safe
        try:
            reply = await self._json(Call("POST", "/jobs", body, safe=keyed))
            return answered(_core.submitted(body, reply), body, reply)
        except DuplicateJob as exc:
            if generated or exc.after_uncertain_try:  # our own earlier try was stored
                return _core.duplicate_of_ours(exc, body)
            raise

    async def submit_graph(
        self, items: Iterable[Mapping[str, Any]], *, call_key: str | None = None
    ) -> list[Job]:
        """Submit a graph in one ``POST /jobs/batch``: items are ``POST /jobs`` bodies with a
        ``ref`` that later items name in ``depends_on``. Stored whole or not at all; one Job
        per item, in order, each with its ``ref``. Each item without an idempotency key gets
        one derived from ``call_key``: the same call again answers with the stored graph."""
        chunk, request = _core.graph_request(items, _core.call_key(call_key))
        return _core.graph_jobs(chunk, await self._json(request))

    async def submit_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = _core.MAX_BATCH_JOBS,
        progress: Callable[[int], None] | None = None,
        call_key: str | None = None,
    ) -> list[Job]:
        """Submit ``POST /jobs`` bodies through ``POST /jobs/batch`` (split by count and size);
        one Job per item, in order. ``progress(n)`` is called after each batch.

        Each item without an idempotency key gets one derived from ``call_key`` (generated
        when not given): calling again with the same items and ``call_key`` submits nothing
        twice. An error that stops the call carries the jobs accepted so far
        (``submitted``) and the call key (``call_key``)."""
        plan = _core.BatchPlan(
            items, _core.call_key(call_key), batch_size, self._batch_bytes,
            caller_key=call_key is not None,
        )  # fmt: skip
        for chunk in plan:
            try:
                reply = await self._json(_core.batch_request(chunk))
            except PayloadTooLarge as exc:
                if plan.shrink(chunk, exc):
                    self._batch_bytes = plan.max_bytes  # learned: later calls start there
                    continue
                plan.incomplete(exc)
                raise
            except AsyncZClientError as exc:
                plan.incomplete(exc)
                raise
            plan.accept(chunk, reply)
            if progress is not None:
                progress(len(chunk))
        return plan.jobs

    # --- read ----------------------------------------------------------------------------

    async def get(self, job_id: str) -> Job:
        return Job.from_api(await self._json(Call("GET", f"/jobs/{quote(job_id)}")))

    async def attempts(self, job_id: str) -> list[Attempt]:
        reply = await self._json(Call("GET", f"/jobs/{quote(job_id)}/attempts"))
        return [Attempt.from_api(a) for a in reply["items"]]

    async def steps(self, job_id: str) -> list[Step]:
        """A durable job's stored steps, every page, in the order first stored."""
        return await all_steps_async(self._json, job_id)

    async def wait(self, job_id: str, timeout: float | None = 60.0) -> Job:
        """Poll (with growing pauses, one kept connection) until the job is finished;
        raises :class:`WaitTimeout` after ``timeout`` seconds (``None``: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for delay in _core.poll_delays():
            job = await self.get(job_id)
            if job.finished:
                return job
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(job, timeout or 0.0)
                delay = min(delay, left)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @overload
    async def result(
        self, job_id: str, as_type: None = None, timeout: float | None = 60.0
    ) -> Any: ...
    @overload
    async def result(self, job_id: str, as_type: type[T], timeout: float | None = 60.0) -> T: ...
    async def result(
        self, job_id: str, as_type: type[T] | None = None, timeout: float | None = 60.0
    ) -> T | Any:
        """The job's result once it completes (parsed into ``as_type``, a model or dataclass,
        when given); :class:`JobFailed` (with the job's last error) when it ends dead or
        cancelled; :class:`WaitTimeout` when time runs out."""
        value = _core.outcome(await self.wait(job_id, timeout))
        return value if as_type is None else parse_as(as_type, value)

    async def _pages(self, path: str, params: dict[str, Any]) -> AsyncIterator[Job]:
        while True:
            page = await self._json(Call("GET", path, params=params))
            for item in page["items"]:
                yield Job.from_api(item)
            if not page.get("next_cursor"):
                return
            params = {**params, "cursor": page["next_cursor"]}

    def jobs(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        task: str | None = None,
        submitted_by: str | None = None,
        page_size: int = 100,
        cursor: str | None = None, spawned_by: str | None = None,
    ) -> AsyncIterator[Job]:
        """Every matching job, newest first, page after page (from ``cursor`` if given)."""
        params = {"status": status, "queue": queue, "task": task, "limit": page_size,
                  "cursor": cursor, "submitted_by": submitted_by, "spawned_by": spawned_by}
        return self._pages("/jobs", params)

    def dead(self, *, queue: str | None = None, task: str | None = None, page_size: int = 100,
             cursor: str | None = None) -> AsyncIterator[Job]:  # fmt: skip
        """Every dead job matching the filters, page after page."""
        params = {"queue": queue, "task": task, "limit": page_size, "cursor": cursor}
        return self._pages("/dlq", params)

    async def tasks(self) -> list[TaskInfo]:
        """Every task the API runs, with its payload and result JSON Schemas."""
        return task_infos(await self._json(Call("GET", "/tasks")))

    async def stats(self) -> Stats:
        return Stats.from_api(await self._json(Call("GET", "/stats")))

    async def health(self) -> Health:
        """The API's health; a degraded one (503) is returned, not raised."""
        response, _ = await self._send(Call("GET", "/health", safe=True))
        if response.status_code == 503 and response.content:
            try:
                data = response.json()
                return Health(str(data["status"]), dict(data.get("dependencies") or {}))
            except (ValueError, KeyError, TypeError):
                raise Unavailable(503, "unavailable", response.text[:200], {}) from None
        data = _core.decode(response)
        return Health(str(data["status"]), dict(data.get("dependencies") or {}))

    async def send_event(self, name: str, key: str, payload: Any = None) -> SentEvent:
        """Wake the durable tasks waiting for event ``name`` with ``key`` (scope ``events``):
        the event and how many waits it woke. Sent once: never retried once it may have run."""
        return SentEvent.from_api(await self._json(send_event_call(name, key, payload)))

    # --- operator actions ----------------------------------------------------------------

    async def cancel(self, job_id: str) -> Job:
        """Cancel the job (retried like a read: a second try finding it cancelled succeeds)."""
        try:
            reply = await self._json(Call("POST", f"/jobs/{quote(job_id)}/cancel"))
        except InvalidState as exc:
            if _core.already_done(exc, ("cancelled",)):
                return Job(id=job_id, status="cancelled", cancel_requested=True)
            raise
        return Job.from_api(reply)

    async def replay(self, job_id: str, *, reset_steps: bool = False) -> Job:
        """Replay a dead job (``reset_steps``: a durable job's stored steps go first); a
        second try that finds it replayed by the first is a success."""
        try:
            reply = await self._json(replay_call(job_id, reset_steps))
        except InvalidState as exc:
            if _core.already_done(exc, _core.REPLAYED):
                return Job(id=job_id, status=str(exc.job_status))
            raise
        return Job.from_api(reply)

    async def purge(self, job_id: str) -> None:
        """Delete a dead job for good (a second try that finds it gone is a success)."""
        try:
            await self._json(Call("DELETE", f"/dlq/{quote(job_id)}"))
        except NotFound as exc:
            if not _core.already_done(exc, ("purged",)):
                raise

    async def replay_all(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Replay every dead job matching the filters, however many (page after page until
        none is left); the ids replayed. A job that dies again meanwhile is not replayed
        twice. ``progress(n)`` is called after each page."""
        replayed: list[str] = []
        seen: set[str] = set()
        while True:
            ids = (await self._json(_core.replay_page(queue, task)))["job_ids"]
            fresh = [i for i in ids if i not in seen]
            replayed += fresh
            seen.update(fresh)
            if progress is not None:
                progress(len(fresh))
            if len(ids) < _core.REPLAY_PAGE or len(fresh) < len(ids):
                return replayed
