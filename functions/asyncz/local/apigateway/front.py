"""The HTTP server under the local API Gateway front: uvicorn (httptools) on a thread and a
uvloop event loop of its own, with a small ASGI adapter that hands each whole request to the
gateway's app."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn

from asyncz.eventloop import new_event_loop

MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
IDLE_TIMEOUT_S = 60.0  # a kept-alive connection with no request in progress


@dataclass(slots=True)
class Request:
    """One whole request: header names as sent, values decoded as ISO-8859-1."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    peer: str


@dataclass(slots=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


App = Callable[[Request], Awaitable[Response]]


def _target(scope: dict[str, Any]) -> str:
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string") or b""
    return str((path + (b"?" + query if query else b"")).decode("latin-1"))


class _Adapter:
    """ASGI → :data:`App`: read the body (bounded), call the app, write its response."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await self._send(send, Response(413, [], b'{"message":"Request Too Long"}'))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        client = scope.get("client") or ("127.0.0.1", 0)
        request = Request(
            method=scope["method"],
            target=_target(scope),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            body=b"".join(chunks),
            peer=str(client[0]),
        )
        await self._send(send, await self.app(request))

    @staticmethod
    async def _send(send: Any, response: Response) -> None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})


class HttpServer:
    """Serves ``app`` with uvicorn on its own thread and event loop until :meth:`close`.

    The socket is bound at construction, so a busy port fails in the caller's thread.
    """

    def __init__(
        self,
        app: App,
        host: str,
        port: int,
        *,
        on_error: Callable[[Exception], None],
        backlog: int = 256,
    ) -> None:
        self.on_error = on_error
        self.sock = socket.create_server((host, port), backlog=backlog)
        # accepted connections inherit it: without it, a response's header and body writes
        # meet the client's delayed ACK and every request waits ~40 ms
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server_address: tuple[Any, ...] = self.sock.getsockname()
        config = uvicorn.Config(
            _Adapter(app),
            http="httptools",
            lifespan="off",
            access_log=False,
            log_level="warning",
            timeout_keep_alive=int(IDLE_TIMEOUT_S),
            proxy_headers=False,  # the peer is the client: the gateway sets X-Forwarded-*
            backlog=backlog,
        )
        self.server = uvicorn.Server(config)
        # (uvicorn installs signal handlers only on the main thread: the runner keeps them)
        self._thread = threading.Thread(target=self._run, name="http-front", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self.server.serve(sockets=[self.sock]))
        except Exception as exc:  # noqa: BLE001 - reported, the runner decides
            self.on_error(exc)

    def close(self) -> None:
        """Stop accepting, let in-flight requests end, and wait for the thread."""
        if self._thread.is_alive():
            self.server.should_exit = True
            self._thread.join(15)
        self.sock.close()
