"""API Lambda: the FastAPI app behind API Gateway via Mangum, for every route (REST API proxy
events, as deployed, and HTTP API ones alike).

Importing this module does no network I/O; the app is built at the first invocation and kept
for the sandbox's life, and it connects at the first request that needs it.
"""

from __future__ import annotations

import asyncio
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mangum import Mangum

from asyncz import eventloop, tracing
from asyncz.api.app import Waker, create_app
from asyncz.api.guards import header_map, key_rejection
from asyncz.api.replies import Reply, error_reply, json_response
from asyncz.observability import PowertoolsMetricsSink, lambda_entry
from asyncz.settings import Settings, get_settings

INVALID_UTF8 = error_reply(422, "invalid_utf8", "the body is not valid UTF-8")
INVALID_BASE64 = error_reply(422, "invalid_body", "the body is not valid base64")


def lambda_waker(function_name: str) -> Waker:
    """Wake one worker with an async Lambda invoke (off the event loop)."""

    async def wake() -> None:
        from asyncz.fleet.invoke import invoke_worker

        await asyncio.to_thread(invoke_worker, function_name)

    return wake


@dataclass(frozen=True, slots=True)
class Sandbox:
    """What an api sandbox keeps warm: the app behind Mangum."""

    adapter: Mangum
    key_ok: Callable[[str], bool]

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        # Every invocation runs on the sandbox's one event loop, so the pools bound to it at
        # the first request serve every warm invocation.
        eventloop.sandbox_loop(plain=True)
        try:
            return self.adapter(event, context)
        except UnicodeEncodeError:
            # Mangum encodes a text body before the app runs: lone surrogates have no UTF-8
            # form. The client's error, not a crash.
            return self.refuse(event, context, INVALID_UTF8)
        except (binascii.Error, ValueError):  # Mangum decodes a base64 body before the app
            return self.refuse(event, context, INVALID_BASE64)

    def refuse(self, event: dict[str, Any], context: Any, reply: Reply) -> dict[str, Any]:
        """A body the app never saw, refused after the key check as the app's guard would
        refuse it, shaped by Mangum's handler for the event as the app's responses are."""
        gateway = self.adapter.infer(event, context)
        scope = gateway.scope
        reply = key_rejection(scope["path"], header_map(scope["headers"]), self.key_ok) or reply
        response = json_response(reply)
        headers = [[name, value] for name, value in response.raw_headers]
        body = bytes(response.body)
        return gateway({"status": response.status_code, "headers": headers, "body": body})


def build_sandbox(settings: Settings, *, waker: Waker | None = None) -> Sandbox:
    """``waker`` replaces the worker invoke."""
    fn = settings.worker_function_name if settings.wake_worker else None
    wake = waker or (lambda_waker(fn) if fn else None)
    if waker is None and fn:
        from asyncz.fleet.invoke import warm_in_background

        warm_in_background()
    # The sandbox's one loop, current before Mangum looks for one: else Mangum makes (and
    # leaves open) a loop of its own that no invocation runs on.
    eventloop.sandbox_loop(plain=True)
    app = create_app(settings, metrics=PowertoolsMetricsSink(), waker=wake)
    return Sandbox(Mangum(app, lifespan="off"), app.state.gate.known)


_sandbox: Sandbox | None = None


def reset() -> None:
    """Forget the sandbox's app (tests that change settings)."""
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
    try:
        return _sandbox(event, context)
    finally:
        tracing.flush()  # the sandbox may freeze once this returns
