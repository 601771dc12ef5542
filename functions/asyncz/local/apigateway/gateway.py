"""A local stand-in for API Gateway (REST API, Lambda proxy integration).

Each HTTP request becomes a REST v1 proxy event for the resource ``/{proxy+}`` (``/`` for the
root), is handed to an idle api sandbox, and the handler's proxy response is written back. Like
API Gateway it answers 502 when the function fails or returns garbage, and 504 after 29 s.

Everything here runs on one event loop (uvicorn's, :mod:`asyncz.local.apigateway.front`): a request
waits for a free sandbox and for its reply without holding a thread; the loop watches each
sandbox's pipe.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from asyncz.local.apigateway.front import HttpServer, Request, Response
from asyncz.local.apigateway.proxy_events import (
    INTEGRATION_TIMEOUT_S,
    BadResponseError,
    build_event,
    gateway_error,
    parse_result,
)
from asyncz.local.context import format_line, log_line
from asyncz.local.lambda_.sandbox import running_loop
from asyncz.local.linebuffer import LineBuffer

# --------------------------------------------------------------------------- api sandbox pools


class ApiBackend(Protocol):
    """Runs the api function for one event; raises ``TimeoutError`` or returns the reply."""

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None: ...


class SandboxPool:
    """Api sandboxes; each takes one request at a time, like Lambda execution environments.

    :meth:`invoke` runs on the front's event loop; :meth:`add` may be called from any thread
    (sandboxes initialise on threads of their own, ~2 s each).
    """

    def __init__(self, sandboxes: list[Any], respawn: Callable[[Any], Any]) -> None:
        self._respawn = respawn
        self._lock = threading.Lock()
        self._idle: deque[Any] = deque()
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._all: list[Any] = []
        self._closed = False
        for sandbox in sandboxes:
            self.add(sandbox)

    @property
    def size(self) -> int:
        return len(self._all)

    def add(self, sandbox: Any) -> None:
        """Make one more (initialised) sandbox available."""
        with self._lock:
            if self._closed:
                sandbox.stop(grace_s=0)
                return
            self._all.append(sandbox)
        self._release(sandbox)

    def _release(self, sandbox: Any) -> None:
        with self._lock:
            if not self._waiters:
                self._idle.append(sandbox)
                return
            waiter = self._waiters.popleft()
        loop = waiter.get_loop()
        if running_loop() is loop:
            self._hand(waiter, sandbox)
        else:
            loop.call_soon_threadsafe(self._hand, waiter, sandbox)

    def _hand(self, waiter: asyncio.Future[Any], sandbox: Any) -> None:
        if waiter.done():  # its request gave up meanwhile
            self._release(sandbox)
        else:
            waiter.set_result(sandbox)

    async def _acquire(self, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            while self._idle:
                sandbox = self._idle.popleft()
                if not sandbox.broken:
                    return sandbox
                self._all.remove(sandbox)  # died while idle (its pipe said so): replace it
                self._retire(sandbox)
            waiter: asyncio.Future[Any] = loop.create_future()
            self._waiters.append(waiter)
        timer = loop.call_later(timeout_s, _give_up, waiter)
        try:
            return await waiter
        except BaseException:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())  # handed over just as we were cancelled
            raise
        finally:
            timer.cancel()

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        started = time.monotonic()
        sandbox = await self._acquire(timeout_s)
        try:
            remaining = max(0.1, timeout_s - (time.monotonic() - started))
            reply: dict[str, Any] = await sandbox.ainvoke(
                event, timeout_s, request_id=event["requestContext"]["requestId"], wait_s=remaining
            )
            return reply
        finally:
            # The loop watches each pipe: a crash or a timeout has set ``broken`` by now.
            if not sandbox.broken:
                self._release(sandbox)
            else:  # a fresh one takes its place
                with self._lock:
                    self._all.remove(sandbox)
                self._retire(sandbox)

    def _retire(self, dead: Any) -> None:
        """Stop watching ``dead`` (here, on the loop) and replace it off the loop."""
        dead.unwatch()
        threading.Thread(
            target=self._replace, args=(dead,), name="api-respawn", daemon=True
        ).start()

    def _replace(self, dead: Any) -> None:
        try:
            fresh = self._respawn(dead)
        except Exception as exc:  # noqa: BLE001 - the pool runs on with one sandbox fewer
            log_line("gateway", f"api sandbox could not be replaced: {exc}", "ERROR")
            return
        self.add(fresh)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandboxes, self._all = self._all, []
        for sandbox in sandboxes:
            sandbox.stop(grace_s=2)


def _give_up(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no api sandbox became free"))


# --------------------------------------------------------------------------- HTTP front


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
    ) -> None:
        self.backend = backend
        self.stage = stage
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
