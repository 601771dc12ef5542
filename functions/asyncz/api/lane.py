"""The api Lambda's submit lane: ``POST /jobs`` (and ``/jobs/batch``) answered without the
ASGI stack.

A Lambda sandbox serves one request at a time, and on the hot path Mangum and Starlette cost
more CPU than the INSERT and the ZADD. So the handler answers ``POST /jobs`` proxy events
here with the same guards (:mod:`asyncz.api.guards`), parsing and replies
(:mod:`asyncz.api.submit`) as the FastAPI route, the same job service on the same pools and
event loop (:mod:`asyncz.composition`), and Mangum's own REST-event handler to read the request
and shape the result: one submit implementation, one set of adapters, one event mapping.
Every other request goes through Mangum to the FastAPI app; ``ASYNCZ_SUBMIT_LANE=false``
sends ``POST /jobs`` there too.
"""

from __future__ import annotations

import binascii
from typing import Any

from mangum.handlers import APIGateway
from mangum.types import LambdaConfig, Response

from asyncz import composition, eventloop
from asyncz.api.guards import UNAUTHORIZED, KeyCheck, body_rejection
from asyncz.api.replies import (
    Reply,
    domain_error_reply,
    error_reply,
    render,
    unexpected_reply,
)
from asyncz.api.submit import accepted, accepted_batch, parse_batch, parse_submit
from asyncz.errors import AsyncZError
from asyncz.fleet.scale_out import ScaleOut, Waker
from asyncz.jobs import NewJob
from asyncz.observability import logger
from asyncz.ports import BatchItem, MetricsSink, SubmitOutcome
from asyncz.settings import Settings

JSON = b"application/json"
SUBMIT_PATHS = frozenset({"/jobs", "/jobs/batch"})


def accepts(event: dict[str, Any]) -> bool:
    """A REST (v1) proxy event for ``POST /jobs`` or ``POST /jobs/batch``."""
    return (
        event.get("httpMethod") == "POST"
        and event.get("path") in SUBMIT_PATHS
        and "requestContext" in event
    )


def _response(reply: Reply) -> Response:
    """The reply as an ASGI-style response, for Mangum to shape as it shapes the app's."""
    body = render(reply.body)
    headers = [[b"content-length", str(len(body)).encode()], [b"content-type", JSON]]
    headers += [[k.lower().encode(), v.encode()] for k, v in reply.headers.items()]
    return {"status": reply.status, "headers": headers, "body": body}


INVALID_UTF8 = error_reply(422, "invalid_utf8", "the body is not valid UTF-8")


def proxy_reply(
    event: dict[str, Any], context: Any, config: LambdaConfig, reply: Reply
) -> dict[str, Any]:
    """``reply`` as the REST proxy result, shaped by Mangum as the app's responses are."""
    return APIGateway(event, context, config)(_response(reply))


class SubmitLane:
    """One per sandbox: answers ``POST /jobs`` with the job service every other route uses,
    on the sandbox's event loop, without the ASGI stack in between."""

    def __init__(
        self,
        settings: Settings,
        *,
        key_ok: KeyCheck,
        config: LambdaConfig,
        metrics: MetricsSink | None = None,
        waker: Waker | None = None,
    ) -> None:
        self.settings = settings
        self.key_ok = key_ok
        self.config = config
        self.metrics = metrics
        self.scale_out = ScaleOut(settings, waker)

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        # Mangum's own REST-event handler reads the request and shapes the result, as it does
        # for every route of the app: one mapping of the proxy event.
        gateway = APIGateway(event, context, self.config)
        try:
            reply = self._answer(gateway)
        except AsyncZError as exc:
            reply = domain_error_reply(exc)
        except Exception:  # noqa: BLE001 - logged; the client gets the one error shape
            reply = unexpected_reply()
        return gateway(_response(reply))

    def _answer(self, gateway: APIGateway) -> Reply:
        headers = {k.decode(): v.decode() for k, v in gateway.scope["headers"]}
        key = headers.get("x-api-key")
        if not key or not self.key_ok(key):
            return UNAUTHORIZED
        try:
            body = gateway.body
        except UnicodeEncodeError:  # lone surrogates in a text body: not UTF-8 on the wire
            return INVALID_UTF8
        except (binascii.Error, ValueError):
            return error_reply(422, "invalid_body", "the body is not valid base64")
        rejection = body_rejection(headers, body, self.settings.max_payload_bytes)
        if rejection is not None:
            return rejection
        if gateway.event.get("path") == "/jobs/batch":
            news = parse_batch(body)
            if isinstance(news, Reply):
                return news
            return accepted_batch(eventloop.run(self._submit_many(news)))
        new = parse_submit(body, headers.get("idempotency-key"))
        if isinstance(new, Reply):
            return new
        return accepted(eventloop.run(self._submit(new)))

    async def _submit(self, new: NewJob) -> SubmitOutcome:
        service = await composition.current_service(self.settings, metrics=self.metrics)
        sub = await service.submit(new)
        logger.append_keys(job_id=sub.job_id)
        await self.scale_out(service.broker)
        return sub

    async def _submit_many(self, news: list[NewJob]) -> list[BatchItem]:
        service = await composition.current_service(self.settings, metrics=self.metrics)
        items = await service.submit_many(news)
        await self.scale_out(service.broker)
        return items
