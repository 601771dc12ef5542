"""The api Lambda's submit lane: ``POST /jobs`` (and ``/jobs/batch``) answered without the
ASGI stack.

A Lambda sandbox serves one request at a time, and on the hot path Mangum and Starlette cost
more CPU than the INSERT and the ZADD. So the handler answers ``POST /jobs`` proxy events
here with the same guards (:mod:`asyncz.api.guards`), parsing and replies
(:mod:`asyncz.api.submit`) as the FastAPI route, and the same job service on the same pools
and event loop (:mod:`asyncz.runtime`): one submit implementation, one set of adapters.
Every other request goes through Mangum to the FastAPI app; ``ASYNCZ_SUBMIT_LANE=false``
sends ``POST /jobs`` there too.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from asyncz import runtime
from asyncz.api.guards import UNAUTHORIZED, KeyCheck, body_rejection
from asyncz.api.replies import (
    Reply,
    domain_error_reply,
    error_reply,
    render,
    unexpected_reply,
)
from asyncz.api.submit import (
    WakeOne,
    Waker,
    accepted,
    accepted_batch,
    parse_batch,
    parse_submit,
)
from asyncz.errors import AsyncZError
from asyncz.jobs import NewJob
from asyncz.observability import logger
from asyncz.ports import BatchItem, MetricsSink, Submitted
from asyncz.settings import Settings

SUBMIT_PATHS = frozenset({"/jobs", "/jobs/batch"})


def accepts(event: dict[str, Any]) -> bool:
    """A REST (v1) proxy event for ``POST /jobs`` or ``POST /jobs/batch``."""
    return (
        event.get("httpMethod") == "POST"
        and event.get("path") in SUBMIT_PATHS
        and "requestContext" in event
    )


def request_headers(event: dict[str, Any]) -> dict[str, str]:
    """Lower-case names; multi-value headers joined with ", " (as Mangum does)."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    for name, values in (event.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ", ".join(values) if isinstance(values, list) else ""
    return headers


def request_body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    # lone surrogates become bytes that fail the UTF-8 guard, as a raw body would
    return body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)


def proxy_result(reply: Reply) -> dict[str, Any]:
    """The REST proxy integration's result, shaped as Mangum shapes the app's responses."""
    body = render(reply.body)
    headers = {"content-length": str(len(body)), "content-type": "application/json"}
    headers.update({k.lower(): v for k, v in reply.headers.items()})
    return {
        "statusCode": reply.status,
        "headers": headers,
        "multiValueHeaders": {},
        "body": body.decode(),
        "isBase64Encoded": False,
    }


class SubmitLane:
    """One per sandbox: answers ``POST /jobs`` with the job service every other route uses,
    on the sandbox's event loop, without the ASGI stack in between."""

    def __init__(
        self,
        settings: Settings,
        *,
        key_ok: KeyCheck,
        metrics: MetricsSink | None = None,
        waker: Waker | None = None,
    ) -> None:
        self.settings = settings
        self.key_ok = key_ok
        self.metrics = metrics
        self.wake_one = WakeOne(waker)

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self._answer(event)
        except AsyncZError as exc:
            reply = domain_error_reply(exc)
        except Exception:  # noqa: BLE001 - logged; the client gets the one error shape
            reply = unexpected_reply()
        return proxy_result(reply)

    def _answer(self, event: dict[str, Any]) -> Reply:
        headers = request_headers(event)
        key = headers.get("x-api-key")
        if not key or not self.key_ok(key):
            return UNAUTHORIZED
        try:
            body = request_body(event)
        except (binascii.Error, ValueError):
            return error_reply(422, "invalid_body", "the body is not valid base64")
        rejection = body_rejection(headers, body, self.settings.max_payload_bytes)
        if rejection is not None:
            return rejection
        if event.get("path") == "/jobs/batch":
            news = parse_batch(body)
            if isinstance(news, Reply):
                return news
            return accepted_batch(runtime.run(self._submit_many(news)))
        new = parse_submit(body, headers.get("idempotency-key"))
        if isinstance(new, Reply):
            return new
        return accepted(runtime.run(self._submit(new)))

    async def _submit(self, new: NewJob) -> Submitted:
        service = await runtime.current_service(self.settings, metrics=self.metrics)
        sub = await service.submit(new)
        logger.append_keys(job_id=sub.job_id)
        await self.wake_one(service.broker)
        return sub

    async def _submit_many(self, news: list[NewJob]) -> list[BatchItem]:
        service = await runtime.current_service(self.settings, metrics=self.metrics)
        items = await service.submit_many(news)
        await self.wake_one(service.broker)
        return items
