"""The FastAPI app: its composition (the routes of :mod:`asyncz.api.routes`, one module per
resource of the path) and its error handling.

Endpoints are ``async def`` on async pools (a sync endpoint costs a thread hop per
request). Every error leaves through the app's exception handlers or the input guard, as a
reply (:mod:`asyncz.api.replies`) of one shape: ``{"error": <code>, "message": <text>}``.
"""

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from asyncz import composition
from asyncz.access import KeyRing, parse_rate
from asyncz.api.access import AccessGate
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
from asyncz.api.routes.audit import mount_audit
from asyncz.api.routes.callbacks import mount_callbacks
from asyncz.api.routes.dlq import mount_dlq
from asyncz.api.routes.events import mount_events
from asyncz.api.routes.jobs import mount_jobs
from asyncz.api.routes.keys import mount_access
from asyncz.api.routes.queues import mount_queues
from asyncz.api.routes.stats import mount_stats
from asyncz.api.routes.steps import mount_steps
from asyncz.api.routes.tasks import mount_tasks
from asyncz.api.routes.tasks_models import TaskList, task_list
from asyncz.api.routes.webhooks import mount_webhooks
from asyncz.api.ui import mount_ui
from asyncz.connections import api_key_hashes
from asyncz.errors import AsyncZError
from asyncz.fleet.scale_out import ScaleOut, Waker
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

    mount_jobs(app, state.service, state.scale_out)
    mount_steps(app, state.service)
    mount_events(app, state.service)
    mount_callbacks(app, state.service)
    mount_dlq(app, state.service)
    mount_stats(app, state.service, state.health)
    mount_tasks(app, state.service, state.tasks)
    mount_queues(app, state.service, state.scale_out)
    mount_ui(app, state.service)
    mount_access(app, state.service)
    mount_audit(app, state.service)
    mount_activity(app, state.service)
    mount_webhooks(app, state.service)
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
    return AccessGate(ring, broker, parse_rate(settings.callback_rate))
