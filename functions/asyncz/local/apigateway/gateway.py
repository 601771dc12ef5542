"""A local stand-in for API Gateway (REST API, Lambda proxy integration).

Each HTTP request becomes a REST v1 proxy event for the resource ``/{proxy+}`` (``/`` for the
root), is handed to an idle api sandbox, and the handler's proxy response is written back. Like
API Gateway it answers 502 when the function fails or returns garbage, and 504 after 29 s.

Everything here runs on one event loop (uvicorn's, :mod:`asyncz.local.apigateway.front`): a request
waits for a free sandbox and for its reply without holding a thread; the loop watches each
sandbox's pipe.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from asyncz.local.apigateway.front import HttpServer, Request, Response
from asyncz.local.apigateway.proxy_events import (
    INTEGRATION_TIMEOUT_S,
    BadResponseError,
    build_event,
    build_http_event,
    gateway_error,
    parse_result,
)
from asyncz.local.context import format_line, log_line
from asyncz.local.lambda_.pool import ApiBackend
from asyncz.local.linebuffer import LineBuffer


class Gateway:
    """The HTTP front: serves until :meth:`close`, on a background thread and event loop.

    ``backend`` may be swapped while serving (the runner starts with a placeholder). The
    access log (one line per request) goes through :class:`LineBuffer`: the loop never
    waits on the output; :meth:`close` writes the last lines.
    """

    def __init__(
        self,
        backend: ApiBackend,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        stage: str = "local",
        access_log: bool = True,
        events: str = "rest",
    ) -> None:
        self.backend = backend
        self.stage = stage
        self.events = events  # "rest": the REST API's v1 events; "http": payload format 2.0
        self.access_log = access_log
        self.access_lines = LineBuffer()
        self.http = HttpServer(self._serve, host, port, on_error=self._on_error)
        self.server_address = self.http.server_address
        self._port = str(self.server_address[1])

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self.http.start()

    def close(self) -> None:
        self.http.close()
        self.access_lines.close()

    @staticmethod
    def _on_error(exc: Exception) -> None:
        log_line("gateway", f"front failed: {exc!r}", "ERROR")

    def _event(self, request: Request, request_id: str) -> dict[str, Any]:
        """The proxy event, with the ``X-Forwarded-*`` headers API Gateway sets: the client's
        address appended to ``X-Forwarded-For``, its own protocol and port."""
        pairs: list[tuple[str, str]] = []
        forwarded_for = None
        for name, value in request.headers:
            low = name.lower()
            if low == "x-forwarded-for":
                forwarded_for = value if forwarded_for is None else f"{forwarded_for}, {value}"
            elif low not in ("x-forwarded-proto", "x-forwarded-port"):
                pairs.append((name, value))
        peer = request.peer
        pairs += (
            ("X-Forwarded-For", f"{forwarded_for}, {peer}" if forwarded_for else peer),
            ("X-Forwarded-Proto", "http"),
            ("X-Forwarded-Port", self._port),
        )
        if self.events == "http":
            return build_http_event(
                request.method, request.target, pairs, request.body, source_ip=peer,
                request_id=request_id,
            )  # fmt: skip
        return build_event(
            request.method,
            request.target,
            pairs,
            request.body,
            source_ip=peer,
            stage=self.stage,
            request_id=request_id,
        )

    async def _serve(self, request: Request) -> Response:
        started = time.monotonic()
        request_id = str(uuid.uuid4())
        try:
            event = self._event(request, request_id)
            reply = await self.backend.invoke(event, INTEGRATION_TIMEOUT_S)
            if not reply.get("ok"):
                log_line(
                    "gateway",
                    "api function failed",
                    "ERROR",
                    request_id=request_id,
                    error=reply.get("error"),
                    trace=reply.get("trace"),
                )
                status, headers, payload = gateway_error(502, "Internal server error")
            else:
                status, headers, payload = parse_result(reply.get("result"))
        except TimeoutError:
            status, headers, payload = gateway_error(504, "Endpoint request timed out")
        except BadResponseError as exc:
            log_line(
                "gateway", f"malformed Lambda proxy response: {exc}", "ERROR", request_id=request_id
            )
            status, headers, payload = gateway_error(502, "Internal server error")
        except Exception as exc:  # noqa: BLE001 - a crashed sandbox: API Gateway says 502 too
            log_line("gateway", f"api sandbox failed: {exc}", "ERROR", request_id=request_id)
            status, headers, payload = gateway_error(502, "Internal server error")
        if self.access_log:
            self.access_lines.write(
                format_line(
                    "gateway",
                    f"{request.method} {request.target} {status}",
                    request_id=request_id,
                    status=status,
                    ms=round((time.monotonic() - started) * 1000, 1),
                )
            )
        return Response(status, [*headers, ("x-amzn-RequestId", request_id)], payload)
