"""The FastAPI app: submit, status, list, attempts, cancel, DLQ, replay, health, stats.

Endpoints are ``async def`` on async pools (a sync endpoint costs a thread hop per
request). Every error leaves through :func:`_error` with one shape:
``{"error": <code>, "message": <text>}``.
"""

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from asyncz import runtime
from asyncz.api.guards import PUBLIC_PATHS, InputGuard
from asyncz.api.schemas import (
    AttemptList,
    AttemptOut,
    BulkReplay,
    BulkReplayed,
    ErrorOut,
    Health,
    JobOut,
    JobPage,
    JobState,
    Stats,
    StatusName,
    SubmitJob,
    Submitted,
)
from asyncz.connections import api_key_hashes, hash_api_key
from asyncz.errors import (
    AsyncZError,
    BrokerUnavailableError,
    DuplicateJobError,
    InvalidCursorError,
    InvalidInputError,
    InvalidTransitionError,
    JobNotFoundError,
    StoreUnavailableError,
    UnknownTaskError,
)
from asyncz.jobs import NewJob
from asyncz.observability import logger
from asyncz.service import JobService, MetricsSink
from asyncz.settings import Settings

log = logging.getLogger("asyncz.api")

Waker = Callable[[], Awaitable[None]]

_STATUS_OF: dict[type[AsyncZError], int] = {
    JobNotFoundError: 404,
    UnknownTaskError: 422,
    InvalidCursorError: 422,
    InvalidInputError: 422,
    InvalidTransitionError: 409,
    DuplicateJobError: 409,
    StoreUnavailableError: 503,
    BrokerUnavailableError: 503,
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in [
        (401, "missing or wrong API key"),
        (404, "no such job"),
        (409, "the job's state does not allow this"),
        (413, "body too large"),
        (415, "body is not JSON"),
        (422, "invalid input"),
        (503, "a dependency is unavailable"),
    ]
}

WAKE_CHECK_SECONDS = 5.0


def _error(http_status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    body = {"error": code, "message": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=http_status)


class ApiState:
    """Per-sandbox state: settings, accepted key hashes (loaded once), wake-up bookkeeping."""

    def __init__(self, settings: Settings, metrics: MetricsSink | None, waker: Waker | None):
        self.settings = settings
        self.metrics = metrics
        self.waker = waker
        self._key_hashes: frozenset[str] | None = None
        self._workers_seen_at = 0.0

    def key_hashes(self) -> frozenset[str]:
        if self._key_hashes is None:
            self._key_hashes = api_key_hashes(self.settings)
        return self._key_hashes

    async def service(self) -> JobService:
        return await runtime.current_service(self.settings, metrics=self.metrics)

    async def maybe_wake_worker(self, service: JobService) -> None:
        """Scale from zero: when no worker is alive, start one (a burst wakes only one)."""
        if self.waker is None or time.monotonic() - self._workers_seen_at < WAKE_CHECK_SECONDS:
            return
        try:
            if await service.broker.live_workers() > 0:
                self._workers_seen_at = time.monotonic()
                return
            if await service.broker.try_lock("wake-worker", WAKE_CHECK_SECONDS):
                await self.waker()
                self._workers_seen_at = time.monotonic()
        except Exception:
            log.warning("could not wake a worker", exc_info=True)


def create_app(
    settings: Settings, *, metrics: MetricsSink | None = None, waker: Waker | None = None
) -> FastAPI:
    """Build the app; nothing connects until the first request."""
    state = ApiState(settings, metrics, waker)
    app = FastAPI(
        title="AsyncZ Serverless",
        version="0.1.0",
        description="Durable background jobs on AWS Lambda. Send `x-api-key` on every call "
        "but `/health`.",
        responses=_ERRORS,
    )
    app.add_middleware(
        InputGuard,
        max_body_bytes=settings.max_payload_bytes,
        key_ok=lambda key: _key_matches(key, state.key_hashes()),
    )
    app.openapi = lambda: _openapi_with_key(app)  # type: ignore[method-assign]

    @app.exception_handler(AsyncZError)
    async def domain_error(request: Request, exc: AsyncZError) -> JSONResponse:
        status = _STATUS_OF.get(type(exc), 500)
        if status >= 500 and status != 503:
            log.exception("unexpected domain error")
        job_id = getattr(exc, "job_id", None)
        job_status = getattr(exc, "status", None)
        return _error(
            status,
            exc.code,
            str(exc),
            job_id=job_id,
            status=str(job_status) if job_status is not None else None,
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _error(500, "internal_error", "unexpected error; it has been logged")

    # POST /jobs is the hot path: a plain Starlette route (FastAPI's per-request dependency
    # and response-model machinery cost more than the INSERT); the key is checked by the
    # InputGuard; its OpenAPI operation is generated from the same models (_openapi_with_key).
    async def submit_job(request: Request) -> Response:
        try:
            body = SubmitJob.model_validate_json(await request.body())
        except ValidationError as exc:
            return _validation_error(exc.errors(include_url=False), prefix=("body",))
        task = body.task or body.payload.get("task")
        if not isinstance(task, str) or not task:
            return _error(422, "missing_task", "give `task` (or `payload.task`)")
        idempotency_key = body.idempotency_key or request.headers.get("idempotency-key")
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            return _error(422, "validation_error", "Idempotency-Key is 1 to 200 characters")
        svc = await state.service()
        sub = await svc.submit(
            NewJob(
                task=task,
                payload=body.payload,
                queue=body.queue,
                priority=body.priority,
                max_retries=body.max_retries,
                timeout_seconds=body.timeout_seconds,
                delay_seconds=body.delay_seconds or 0.0,
                run_at=body.run_at,
                idempotency_key=idempotency_key,
            )
        )
        logger.append_keys(job_id=sub.job_id)
        await state.maybe_wake_worker(svc)
        return JSONResponse(
            {"job_id": sub.job_id, "status": sub.status.value},
            status_code=202,
            headers={"Location": f"/jobs/{sub.job_id}"},
        )

    app.router.routes.append(Route("/jobs", submit_job, methods=["POST"], name="submit_job"))

    @app.get("/jobs", response_model=JobPage, summary="List jobs")
    async def list_jobs(
        status: StatusName | None = None,
        queue: Annotated[str | None, Query(max_length=100)] = None,
        task: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        page = await (await state.service()).list_jobs(
            status=status, queue=queue, task=task, limit=limit, cursor=cursor
        )
        return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)

    @app.get("/jobs/{job_id}", response_model=JobOut, summary="Job status")
    async def get_job(job_id: UUID) -> Any:
        return JobOut.of(await (await state.service()).get(_about(job_id)))

    @app.get("/jobs/{job_id}/attempts", response_model=AttemptList, summary="Attempt log")
    async def get_attempts(job_id: UUID) -> Any:
        attempts = await (await state.service()).attempts(_about(job_id))
        return AttemptList(job_id=str(job_id), items=[AttemptOut.of(a) for a in attempts])

    @app.post("/jobs/{job_id}/cancel", response_model=JobState, summary="Cancel a job")
    async def cancel_job(job_id: UUID) -> Any:
        status = await (await state.service()).cancel(_about(job_id))
        return JobState(job_id=str(job_id), status=status.value, cancel_requested=True)

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
    async def replay_dead(body: BulkReplay | None = None) -> Any:
        body = body or BulkReplay()
        ids = await (await state.service()).replay_dead(
            queue=body.queue, task=body.task, limit=body.limit
        )
        return BulkReplayed(replayed=len(ids), job_ids=ids)

    @app.post("/dlq/{job_id}/replay", response_model=JobState, summary="Replay one dead job")
    async def replay_job(job_id: UUID) -> Any:
        job = await (await state.service()).replay(_about(job_id))
        return JobState(job_id=job.id, status=job.status.value)

    @app.delete(
        "/dlq/{job_id}", status_code=204, summary="Purge a dead job", response_class=Response
    )
    async def purge_job(job_id: UUID) -> Response:
        await (await state.service()).purge(_about(job_id))
        return Response(status_code=204)

    @app.get("/stats", response_model=Stats, summary="Queue statistics")
    async def stats() -> Any:
        return await (await state.service()).stats()

    @app.get(
        "/health",
        response_model=Health,
        summary="Dependency health (no key needed)",
        responses={503: {"model": Health, "description": "a dependency is down"}},
    )
    async def health() -> Any:
        try:
            svc = await state.service()
        except Exception as exc:  # noqa: BLE001 - e.g. the secret could not be read
            body = {
                "status": "degraded",
                "dependencies": {"config": f"down: {exc}"},
                "dlq_depth": None,
            }
            return JSONResponse(body, status_code=503)
        report = await svc.health()
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)

    return app


def _about(job_id: UUID) -> str:
    """The job id as text, also put on every log line of this invocation."""
    text = str(job_id)
    logger.append_keys(job_id=text)
    return text


def _validation_error(errors: Sequence[Any], prefix: tuple[str, ...] = ()) -> JSONResponse:
    details = [
        {
            "field": ".".join(str(p) for p in (*prefix, *e.get("loc", ()))),
            "problem": e.get("msg", ""),
            "type": e.get("type", ""),
        }
        for e in errors
    ]
    code = (
        "invalid_json"
        if any(d["type"] == "json_invalid" for d in details)
        else ("validation_error")
    )
    fields = ", ".join(d["field"] for d in details) or "body"
    return _error(422, code, f"invalid input: {fields}", details=details)


def _submit_operation(components: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI operation of POST /jobs (a Starlette route, so FastAPI does not see it)."""
    ref = "#/components/schemas/{model}"
    for model in (SubmitJob, Submitted, ErrorOut):
        schema = model.model_json_schema(ref_template=ref)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema

    def error(text: str) -> dict[str, Any]:
        return {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
        }

    return {
        "summary": "Submit a job",
        "operationId": "submit_job_jobs_post",
        "parameters": [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                "description": "same as the body's idempotency_key",
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SubmitJob"}}},
        },
        "responses": {
            "202": {
                "description": "accepted",
                "headers": {
                    "Location": {"schema": {"type": "string"}, "description": "the job's URL"}
                },
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Submitted"}}
                },
            },
            **{str(code): error(spec["description"]) for code, spec in _ERRORS.items()},
        },
    }


def _openapi_with_key(app: FastAPI) -> dict[str, Any]:
    """The generated schema, plus the API key scheme on every operation but /health."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components["securitySchemes"] = {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}
        }
        schema["paths"].setdefault("/jobs", {})["post"] = _submit_operation(
            components.setdefault("schemas", {})
        )
        for path, ops in schema["paths"].items():
            for op in ops.values():
                op["security"] = [] if path in PUBLIC_PATHS else [{"ApiKey": []}]
        app.openapi_schema = schema
    return app.openapi_schema


def _key_matches(key: str, hashes: frozenset[str]) -> bool:
    digest = hash_api_key(key)
    matched = False
    for known in hashes:  # compare against every hash: no early exit to time
        matched |= hmac.compare_digest(digest, known)
    return matched
