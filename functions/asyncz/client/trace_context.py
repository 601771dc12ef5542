"""The caller's trace context on every request the client sends."""

from __future__ import annotations

import sys

import httpx


def send_trace_context(request: httpx.Request) -> None:
    """Send the caller's current trace context (W3C ``traceparent``, through the program's
    own propagator) when the program uses OpenTelemetry: a program that never imported it
    has no context to send, so the client does not import it either (nor require it)."""
    if "opentelemetry.trace" in sys.modules:
        from opentelemetry.propagate import inject

        inject(request.headers)


async def send_trace_context_async(request: httpx.Request) -> None:
    send_trace_context(request)
