"""API Lambda: the FastAPI app behind API Gateway (REST, proxy integration) via Mangum.

Importing this module does no network I/O; the app is built at the first invocation and
kept for the sandbox's life, and its pools connect at the first request that needs them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from mangum import Mangum

from asyncz import runtime
from asyncz.api.app import Waker, create_app
from asyncz.observability import PowertoolsMetricsSink, lambda_entry
from asyncz.settings import Settings, get_settings

_adapter: Mangum | None = None


def lambda_waker(function_name: str) -> Waker:
    """Wake one worker with an async Lambda invoke (off the event loop)."""

    async def wake() -> None:
        from asyncz.fleet.invoke import invoke_worker

        await asyncio.to_thread(invoke_worker, function_name)

    return wake


def build_adapter(settings: Settings) -> Mangum:
    waker = (
        lambda_waker(settings.worker_function_name)
        if settings.wake_worker and settings.worker_function_name
        else None
    )
    app = create_app(settings, metrics=PowertoolsMetricsSink(), waker=waker)
    return Mangum(app, lifespan="off")


@lambda_entry(correlation_paths.API_GATEWAY_REST)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _adapter
    if _adapter is None:
        _adapter = build_adapter(get_settings().require_for("api"))
    # Mangum runs on the thread's current loop; keep it the sandbox's one, so the pools
    # bound to it at the first request serve every warm invocation.
    runtime.sandbox_loop()
    return _adapter(event, context)
