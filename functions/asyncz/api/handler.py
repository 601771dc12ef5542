"""API Lambda: the FastAPI app behind API Gateway (REST, proxy integration) via Mangum,
with ``POST /jobs`` on the submit lane (:mod:`asyncz.api.lane`).

Importing this module does no network I/O; the app and the lane are built at the first
invocation and kept for the sandbox's life, and they connect at the first request that
needs them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mangum import Mangum

from asyncz import eventloop
from asyncz.api import lane
from asyncz.api.app import Waker, create_app
from asyncz.api.guards import KeyCheck
from asyncz.connections import api_key_hashes
from asyncz.observability import PowertoolsMetricsSink, lambda_entry
from asyncz.settings import Settings, get_settings


def lambda_waker(function_name: str) -> Waker:
    """Wake one worker with an async Lambda invoke (off the event loop)."""

    async def wake() -> None:
        from asyncz.fleet.invoke import invoke_worker

        await asyncio.to_thread(invoke_worker, function_name)

    return wake


@dataclass(frozen=True, slots=True)
class Sandbox:
    """What an api sandbox keeps warm: the app behind Mangum, and the submit lane."""

    adapter: Mangum
    lane: lane.SubmitLane | None

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        # Both run on the sandbox's one event loop, so the pools bound to it at the first
        # request serve every warm invocation, whichever path took it.
        eventloop.sandbox_loop(plain=True)
        if self.lane is not None and lane.accepts(event):
            return self.lane(event, context)
        try:
            return self.adapter(event, context)
        except UnicodeEncodeError:
            # Mangum encodes a text body before the app runs: lone surrogates have no UTF-8
            # form. The client's error, answered as the lane answers it, not a crash.
            return lane.proxy_reply(event, context, self.adapter.config, lane.INVALID_UTF8)


def build_sandbox(settings: Settings, *, waker: Waker | None = None) -> Sandbox:
    """``waker`` replaces the worker invoke in the app and the lane."""
    fn = settings.worker_function_name if settings.wake_worker else None
    key_ok = KeyCheck(lambda: api_key_hashes(settings))
    metrics = PowertoolsMetricsSink()
    wake = waker or (lambda_waker(fn) if fn else None)
    if waker is None and fn:
        from asyncz.fleet.invoke import warm_in_background

        warm_in_background()
    # The sandbox's one loop, current before Mangum looks for one: else Mangum makes (and
    # leaves open) a loop of its own that no invocation runs on.
    eventloop.sandbox_loop(plain=True)
    app = create_app(
        settings,
        metrics=metrics,
        waker=wake,
        key_ok=key_ok,
    )
    adapter = Mangum(app, lifespan="off")
    submit_lane = (
        lane.SubmitLane(settings, key_ok=key_ok, config=adapter.config, metrics=metrics, waker=wake)
        if settings.submit_lane
        else None
    )
    return Sandbox(adapter, submit_lane)


_sandbox: Sandbox | None = None


def reset() -> None:
    """Forget the sandbox's app and lane (tests that change settings)."""
    global _sandbox
    _sandbox = None


def request_id(event: dict[str, Any]) -> str | None:
    """The API Gateway request id: every log line of the invocation carries it."""
    context = event.get("requestContext")
    return context.get("requestId") if isinstance(context, dict) else None


@lambda_entry(request_id)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _sandbox
    if _sandbox is None:
        _sandbox = build_sandbox(get_settings().require_for("api"))
    return _sandbox(event, context)
