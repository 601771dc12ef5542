"""The FastAPI app: submit, status, list, attempts, cancel, DLQ, replay, health, stats.

Endpoints are ``async def`` on async pools (a sync endpoint costs a thread hop per
request). Every error leaves through the app's exception handlers or the input guard, as a
reply (:mod:`asyncz.api.replies`) of one shape: ``{"error": <code>, "message": <text>}``.
"""

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from asyncz import composition
from asyncz.access import KeyRing, Principal, Scope
from asyncz.api.access import AccessGate, forbidden
from asyncz.api.guards import InputGuard
from asyncz.api.openapi import ERRORS, openapi_with_key
from asyncz.api.replies import (
    domain_error_reply,
    error_reply,
    json_response,
    unexpected_reply,
    validation_reply,
)
from asyncz.api.routes.activity import mount_activity
from asyncz.api.routes.jobs_models import (
    AttemptList,
    AttemptOut,
    BulkReplay,
    BulkReplayed,
    JobOut,
    JobPage,
    JobState,
    StatusName,
)
from asyncz.api.routes.jobs_submit import submit_reply
from asyncz.api.routes.keys import mount_access, principal_of
from asyncz.api.routes.queues import mount_queues
from asyncz.api.routes.stats_models import Health, ScheduleList, Stats
from asyncz.api.routes.tasks_models import TaskList, task_list
from asyncz.api.ui import mount_ui
from asyncz.connections import api_key_hashes
from asyncz.errors import AsyncZError
from asyncz.fleet.scale_out import ScaleOut, Waker
from asyncz.observability import logger
from asyncz.ports import MetricsSink
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.loader import load_task_modules
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.api")
HEALTH_CACHE_SECONDS = 2.0

__all__ = ["Waker", "create_app"]


class ApiState:
    """Per-sandbox state: settings, metrics, wake-up bookkeeping."""

    def __init__(self, settings: Settings, metrics: MetricsSink | None, waker: Waker | None):
        self.settings = settings
        self.metrics = metrics
        self.scale_out = ScaleOut(settings, waker)
        self._health: tuple[float, dict[str, Any]] | None = None
        self._tasks: TaskList | None = None

    async def service(self) -> JobService:
        return await composition.current_service(self.settings, metrics=self.metrics)

    def registry(self) -> TaskRegistry:
        """The tasks the service runs (imported once; no connection needed)."""
        return load_task_modules(self.settings.task_module_list)

    def tasks(self) -> TaskList:
        if self._tasks is None:
            self._tasks = task_list(self.registry(), self.settings)
        return self._tasks

    async def health(self) -> dict[str, Any]:
        """The health report, reused for a few seconds: an unauthenticated caller cannot
        turn it into load on the database."""
        now = time.monotonic()
        if self._health is None or now - self._health[0] >= HEALTH_CACHE_SECONDS:
            try:
                report = await (await self.service()).health()
            except Exception:
                log.warning("health: configuration unavailable", exc_info=True)
                report = {"status": "degraded", "dependencies": {"config": "down"}}
            self._health = (now, report)
        return self._health[1]


def create_app(
    settings: Settings,
    *,
    metrics: MetricsSink | None = None,
    waker: Waker | None = None,
    gate: AccessGate | None = None,
) -> FastAPI:
    """Build the app; nothing connects until the first request."""
    state = ApiState(settings, metrics, waker)
    gate = gate or access_gate(settings, state.service)
    app = FastAPI(
        title="AsyncZ Serverless",
        version="0.1.0",
        description="Durable background jobs on AWS Lambda. Send `x-api-key` on every call "
        "but `/health`.",
        responses=ERRORS,
        docs_url=None,  # /docs and /ui come from asyncz.api.ui, with their assets bundled
        redoc_url=None,
    )
    app.add_middleware(
        InputGuard,
        max_body_bytes=settings.max_payload_bytes,
        gate=gate,
    )
    app.state.gate = gate  # the handler's key check before Mangum can decode a body
    app.openapi = lambda: openapi_with_key(app, state.registry())  # type: ignore[method-assign]

    @app.exception_handler(AsyncZError)
    async def domain_error(request: Request, exc: AsyncZError) -> JSONResponse:
        return json_response(domain_error_reply(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        return json_response(validation_reply(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}
        reply = error_reply(
            exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail)
        )
        return json_response(reply)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return json_response(unexpected_reply())

    # The submit routes are the hot path: plain Starlette routes (FastAPI's per-request
    # dependency and response-model machinery is work the INSERT does not need) around the
    # one submit function; the InputGuard has checked the key and the body; their OpenAPI
    # operations are generated from the same models (asyncz.api.openapi).
    def submit_route(path: str, name: str, *, batch: bool) -> Route:
        async def submit(request: Request) -> Response:
            reply = await submit_reply(
                await request.body(),
                request.headers,
                batch=batch,
                service=state.service,
                scale_out=state.scale_out,
                submitter=principal_of(request),
            )
            return json_response(reply)

        return Route(path, submit, methods=["POST"], name=name)

    app.router.routes.append(submit_route("/jobs", "submit_job", batch=False))
    app.router.routes.append(submit_route("/jobs/batch", "submit_batch", batch=True))

    @app.get("/jobs", response_model=JobPage, summary="List jobs")
    async def list_jobs(
        request: Request,
        status: StatusName | None = None,
        queue: Annotated[str | None, Query(max_length=100)] = None,
        task: Annotated[str | None, Query(max_length=200)] = None,
        submitted_by: Annotated[str | None, Query(max_length=64)] = None,
        submitted_by_key_id: Annotated[str | None, Query(max_length=80)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        me = principal_of(request)
        if not me.may(Scope.READ):  # a submit-only key lists the jobs it submitted
            if submitted_by not in (None, me.name) or submitted_by_key_id not in (None, me.key_id):
                return json_response(forbidden(me, Scope.READ))
            submitted_by, submitted_by_key_id = None, me.key_id
        page = await (await state.service()).list_jobs(
            status=status, queue=queue, task=task, limit=limit, cursor=cursor,
            submitted_by=submitted_by, submitted_by_key_id=submitted_by_key_id,
        )  # fmt: skip
        return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)

    @app.get("/jobs/{job_id}", response_model=JobOut, summary="Job status")
    async def get_job(job_id: UUID, request: Request) -> Any:
        svc = await state.service()
        job = await svc.get(_about(job_id))
        if not _may_read(principal_of(request), job.submitted_by_key_id):
            return json_response(forbidden(principal_of(request), Scope.READ))
        return JobOut.of(job, {**await svc.graph(job), "waiting_for": await svc.held_reason(job)})

    @app.get("/jobs/{job_id}/attempts", response_model=AttemptList, summary="Attempt log")
    async def get_attempts(job_id: UUID, request: Request) -> Any:
        svc = await state.service()
        me = principal_of(request)
        if not me.may(Scope.READ) and not _may_read(
            me, (await svc.get(str(job_id))).submitted_by_key_id
        ):
            return json_response(forbidden(me, Scope.READ))
        attempts = await svc.attempts(_about(job_id))
        return AttemptList(job_id=str(job_id), items=[AttemptOut.of(a) for a in attempts])

    @app.post(
        "/jobs/{job_id}/cancel",
        response_model=JobState,
        summary="Cancel a job",
        responses={202: {"model": JobState, "description": CASCADING}},
    )
    async def cancel_job(job_id: UUID, request: Request) -> Any:
        svc = await state.service()
        async with svc.access.audited(principal_of(request), "cancel", str(job_id), {}):
            status = await svc.cancel(_about(job_id))
        pending = (await svc.get(str(job_id))).cascade_pending
        state_ = JobState(
            job_id=str(job_id), status=status.value, cancel_requested=True, cascade_pending=pending
        )
        return _cascading(state_)

    @app.get("/dlq", response_model=JobPage, summary="Dead jobs")
    async def list_dlq(
        queue: Annotated[str | None, Query(max_length=100)] = None,
        task: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        page = await (await state.service()).list_dead(
            queue=queue, task=task, limit=limit, cursor=cursor
        )
        return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)

    @app.post("/dlq/replay", response_model=BulkReplayed, summary="Replay dead jobs in bulk")
    async def replay_dead(request: Request, body: BulkReplay | None = None) -> Any:
        body = body or BulkReplay()
        svc = await state.service()
        actor = principal_of(request)
        async with svc.access.audited(actor, "bulk_replay", None, body.model_dump()) as done:
            ids = await svc.replay_dead(queue=body.queue, task=body.task, limit=body.limit)
            done["count"] = len(ids)
        return BulkReplayed(replayed=len(ids), job_ids=ids)

    @app.post(
        "/dlq/{job_id}/replay",
        response_model=JobState,
        summary="Replay one dead job",
        responses={202: {"model": JobState, "description": CASCADING}},
    )
    async def replay_job(job_id: UUID, request: Request) -> Any:
        svc = await state.service()
        async with svc.access.audited(principal_of(request), "replay", str(job_id), {}):
            job = await svc.replay(_about(job_id))
        return _cascading(
            JobState(job_id=job.id, status=job.status.value, cascade_pending=job.cascade_pending)
        )

    @app.delete(
        "/dlq/{job_id}", status_code=204, summary="Purge a dead job", response_class=Response
    )
    async def purge_job(job_id: UUID, request: Request) -> Response:
        svc = await state.service()
        async with svc.access.audited(principal_of(request), "purge", str(job_id), {}):
            await svc.purge(_about(job_id))
        return Response(status_code=204)

    @app.get("/stats", response_model=Stats, summary="Queue statistics")
    async def stats() -> Any:
        return await (await state.service()).stats()

    @app.get("/tasks", response_model=TaskList, summary="Registered tasks and their schemas")
    async def tasks() -> Any:
        limits = {t["task"]: t["limits"] for t in (await state.service()).task_listing()}
        listed = state.tasks().items
        return TaskList(
            items=[t.model_copy(update={"limits": limits.get(t.name, {})}) for t in listed]
        )

    @app.get("/schedules", response_model=ScheduleList, summary="Periodic jobs")
    async def schedules() -> Any:
        return {"items": await (await state.service()).schedules()}

    @app.get(
        "/health",
        response_model=Health,
        summary="Dependency health (no key needed)",
        responses={503: {"model": Health, "description": "a dependency is down"}},
    )
    async def health() -> Any:
        report = await state.health()
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)

    mount_queues(app, state.service)
    mount_ui(app, state.service)
    mount_access(app, state.service)
    mount_activity(app, state.service)
    return app


def access_gate(settings: Settings, service: Callable[[], Awaitable[JobService]]) -> AccessGate:
    """The sandbox's gate: its stored keys (reloaded every few seconds), the configured keys
    (every scope), the per-key rates counted in Redis."""

    async def load() -> list[dict[str, Any]]:
        return await (await service()).store.access.live_keys()

    async def touch(hashes: list[str]) -> None:
        await (await service()).store.access.touch_keys(hashes)

    async def find_one(key_hash: str) -> dict[str, Any] | None:
        return await (await service()).store.access.find_key(key_hash)

    async def broker() -> Any:
        return (await service()).broker

    ring = KeyRing(load, lambda: api_key_hashes(settings), touch=touch, find_one=find_one)
    return AccessGate(ring, broker)


def _may_read(me: Principal, submitter_key_id: str | None) -> bool:
    """Any job with ``read``; with ``submit`` alone, the jobs this key (by its id, not its
    name: a revoked key's name may be another key's now) submitted."""
    return me.may(Scope.READ) or (submitter_key_id is not None and submitter_key_id == me.key_id)


def _about(job_id: UUID) -> str:
    """The job id as text, also put on every log line of this invocation."""
    text = str(job_id)
    logger.append_keys(job_id=text)
    return text


CASCADING = "done; the cascade to its children goes on (cascade_pending, see GET /jobs/{id})"


def _cascading(state: JobState) -> Any:
    """``200`` when the action and its cascade are done; ``202`` while the cascade goes on
    (the recovery sweep finishes it; ``GET /jobs/{id}`` shows ``cascade_pending``)."""
    if not state.cascade_pending:
        return state
    return JSONResponse(state.model_dump(mode="json"), status_code=202)
