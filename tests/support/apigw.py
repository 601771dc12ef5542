"""API Gateway proxy events and a Lambda context for handler tests: REST API (v1) events from
the local runner's own builder and context class (asyncz.local), so there is one of each, and
the HTTP API (payload format 2.0) event for the same request."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from asyncz.local.apigateway.proxy_events import build_event, build_http_event
from asyncz.local.context import LambdaContext


def FakeContext(function_name: str = "asyncz-api", timeout_s: float = 30.0) -> LambdaContext:
    """A Lambda context as the local runner builds it (one context class for both)."""
    return LambdaContext(function_name, timeout_s, memory_limit_in_mb=256)


def rest_event(
    method: str,
    target: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw_body: bytes | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    hdrs = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "User-Agent": "pytest"}
    if body is not None:
        raw_body = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    if api_key is not None:
        hdrs["x-api-key"] = api_key
    hdrs.update(headers or {})
    # the one event builder: the local API Gateway front's, as deployed under stage "prod"
    event = build_event(method, target, list(hdrs.items()), raw_body or b"", stage="prod")
    event["requestContext"]["identity"]["apiKey"] = api_key
    return event


def http_api_event(method: str, target: str, **kwargs: Any) -> dict[str, Any]:
    """The HTTP API (payload format 2.0) event for the request :func:`rest_event` describes,
    from the local runner's own builder (``asyncz dev --api-events http``)."""
    rest = rest_event(method, target, **kwargs)
    pairs = [(k, v) for k, vs in (rest["multiValueHeaders"] or {}).items() for v in vs]
    raw = rest["body"] or ""
    body = base64.b64decode(raw) if rest["isBase64Encoded"] else raw.encode()
    return build_http_event(method, target, pairs, body)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


# the event each flavour of API Gateway sends for one request
EVENTS: dict[str, Callable[..., dict[str, Any]]] = {"rest": rest_event, "http": http_api_event}


def call(handler: Any, method: str, target: str, *, flavour: str = "rest", **kwargs: Any) -> Reply:
    out = handler(EVENTS[flavour](method, target, **kwargs), FakeContext())
    raw = out.get("body") or ""
    data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    for k, vs in (out.get("multiValueHeaders") or {}).items():
        headers[k.lower()] = vs[-1]
    return Reply(out["statusCode"], headers, data)


@contextmanager
def handler_api(settings: Any, api_key: str, flavour: str = "rest") -> Iterator[Any]:
    """``request(method, target, **kw)`` on the api handler of a sandbox built for
    ``settings``: a namespace of ``status`` and the decoded ``body``. Resets the handler."""
    from asyncz.api import handler as api_handler

    api_handler._sandbox = api_handler.build_sandbox(settings)

    def request(method: str, target: str, **kw: Any) -> SimpleNamespace:
        reply = call(api_handler.handler, method, target, api_key=api_key, flavour=flavour, **kw)
        return SimpleNamespace(status=reply.status, body=reply.json() if reply.body else None)

    try:
        yield request
    finally:
        drop_sandbox()


def drop_sandbox() -> None:
    """Forget the handler's cached sandbox and close the services its loop keeps (one for each
    settings it served, each with its pools' connections). Forgetting alone left every test's
    connections open until the test process ended: ~40 of the test server's 100 in one xdist
    worker, beside the other tiers'."""
    from asyncz import composition, eventloop
    from asyncz.api import handler as api_handler

    api_handler.reset()
    loop = eventloop._loop
    if loop is None or loop.is_closed() or loop.is_running():
        return
    for service in composition._services.pop(loop, {}).values():
        loop.run_until_complete(composition.close_service(service))
