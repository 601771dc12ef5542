"""A small HTTP/1.1 server on one asyncio event loop, for the local API Gateway front.

``http.server`` spent a thread per connection and parsed every header block through the
``email`` package: on a 2-core machine the front cost ~0.3 ms of CPU per request, as much as
the Postgres INSERT it fronts. This parses what a front needs (request line, headers,
``Content-Length`` and chunked bodies, ``Expect: 100-continue``, keep-alive, pipelining) and
writes each response in one send. It refuses what it does not understand with a 4xx and
closes the connection; it never guesses where a request ends. A connection may not hold the
server forever: one idle between requests is closed after ``idle_timeout``, and a request
that has not fully arrived within ``request_timeout`` of its first byte (a stalled or
trickling client) is answered 408 and closed. While the app serves a request no timer runs
(the gateway bounds that: API Gateway's 29 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

MAX_HEAD_BYTES = 64 * 1024  # request line + headers
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,8})[ \t]*(?:;[^\r\n]*)?")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
IDLE_TIMEOUT_S = 60.0  # a kept-alive connection with no request in progress
REQUEST_TIMEOUT_S = 30.0  # from a request's first byte to its last
_IDLE, _PARTIAL, _BUSY = "idle", "partial", "busy"


@dataclass(slots=True)
class Request:
    """One parsed request: header names as sent, values decoded as ISO-8859-1."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    peer: str
    keep_alive: bool


@dataclass(slots=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


App = Callable[[Request], Awaitable[Response]]


class HttpError(Exception):
    """A request the server answers itself (4xx/5xx) and then closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_NAME_CHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DROP_NAME_CHARS = str.maketrans("", "", _NAME_CHARS)
_FRAMING = {"content-length", "transfer-encoding", "connection", "expect"}


def _is_token(text: str) -> bool:
    return bool(text) and not text.translate(_DROP_NAME_CHARS)


class _Head:
    __slots__ = (
        "chunked",
        "expect",
        "headers",
        "keep_alive",
        "length",
        "method",
        "target",
        "version",
    )

    def __init__(self, raw: bytes) -> None:
        # ISO-8859-1 maps every byte to one character: decoding cannot fail or change lengths
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not _is_token(parts[0]) or not parts[1]:
            raise HttpError(400, "Bad request line")
        self.method, self.target, self.version = parts
        if self.version not in ("HTTP/1.1", "HTTP/1.0"):
            if not self.version.startswith("HTTP/"):
                raise HttpError(400, "Bad request line")
            raise HttpError(505, "HTTP Version Not Supported")
        headers: list[tuple[str, str]] = []
        framing: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            # obs-fold (a line starting with whitespace) and "Name :" are smuggling tools
            if not colon or not _is_token(name):
                raise HttpError(400, "Bad header line")
            value = value.strip(" \t")
            if "\r" in value or "\n" in value or "\0" in value:
                raise HttpError(400, "Bad header value")
            lower = name.lower()
            if lower in _FRAMING:
                framing.setdefault(lower, []).extend(v.strip().lower() for v in value.split(","))
            headers.append((name, value))
        self.headers = headers
        self._framing(framing)

    def _framing(self, framing: dict[str, list[str]]) -> None:
        expect = framing.get("expect", [])
        if any(e != "100-continue" for e in expect):
            raise HttpError(417, "Expectation Failed")
        self.expect = bool(expect) and self.version == "HTTP/1.1"
        tokens = framing.get("connection", [])
        if self.version == "HTTP/1.1":
            self.keep_alive = "close" not in tokens
        else:
            self.keep_alive = "keep-alive" in tokens
        lengths = set(framing.get("content-length", []))
        codings = framing.get("transfer-encoding", [])
        self.chunked = False
        self.length = 0
        if codings:
            if codings[-1] != "chunked":
                raise HttpError(501, "Transfer-Encoding not supported")
            self.chunked = True
            # RFC 9112 §6.1: a length beside a transfer coding may be a smuggling attempt
            self.keep_alive = self.keep_alive and not lengths
        elif lengths:
            if len(lengths) > 1 or not all(v.isdigit() and v.isascii() for v in lengths):
                raise HttpError(400, "Bad Content-Length")
            self.length = int(lengths.pop())
            if self.length > MAX_BODY_BYTES:
                raise HttpError(413, "Request Entity Too Large")


def _chunked_body(buf: bytearray) -> tuple[bytes, int] | None:
    """The decoded body and the bytes it took, or ``None`` while it is incomplete."""
    pos = 0
    parts: list[bytes] = []
    size_total = 0
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > 1024:
                raise HttpError(400, "Bad chunk size")
            return None
        match = _CHUNK_SIZE.fullmatch(buf, pos, eol)
        if match is None:
            raise HttpError(400, "Bad chunk size")
        size = int(match.group(1), 16)
        size_total += size
        if size_total > MAX_BODY_BYTES:
            raise HttpError(413, "Request Entity Too Large")
        pos = eol + 2
        if size == 0:
            break
        if len(buf) < pos + size + 2:
            return None
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise HttpError(400, "Bad chunk")
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2
    while True:  # trailer fields, ignored, up to the empty line
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > MAX_HEAD_BYTES:
                raise HttpError(431, "Request Header Fields Too Large")
            return None
        if eol == pos:
            return b"".join(parts), eol + 2
        pos = eol + 2


class _Connection(asyncio.Protocol):
    """One client connection: requests are served one after another, in order."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.head: _Head | None = None
        self.busy = False
        self.paused = False
        self.eof = False
        # idle, partial (a request is arriving) or busy (the app serves it); the deadline is
        # set when the state is entered, so a client trickling bytes does not extend it
        self.state = _IDLE
        self.deadline = server.loop.time() + server.idle_timeout

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else ""
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next()
        elif len(self.buf) > MAX_HEAD_BYTES and self.transport is not None:
            self.transport.pause_reading()  # a pipelining client waits for its answers
            self.paused = True

    def eof_received(self) -> bool:
        # The client will send no more; an answer still in flight goes out, then we close.
        self.eof = True
        if not self.busy:
            self._next()
        return True

    def _next(self) -> None:
        try:
            request = self._parse()
        except HttpError as err:
            self._refuse(err)
            return
        if request is None:
            if self.eof and self.transport is not None:
                self.transport.close()  # nothing more will come to complete it
            state = _PARTIAL if self.buf or self.head is not None else _IDLE
            if state != self.state:
                self.state = state
                timeout = (
                    self.server.request_timeout if state is _PARTIAL else self.server.idle_timeout
                )
                self.deadline = self.server.loop.time() + timeout
            return
        self.busy = True
        self.state = _BUSY
        self.server.loop.create_task(self._serve(request))

    def expire(self, now: float) -> None:
        """Close the connection if it has been idle, or its request arriving, for too long."""
        if self.state is _BUSY or now < self.deadline or self.transport is None:
            return
        if self.state is _PARTIAL:
            self._refuse(HttpError(408, "Request Timeout"))
        else:
            self.transport.close()

    def _parse(self) -> Request | None:
        buf = self.buf
        if self.head is None:
            while buf[:2] == b"\r\n":  # RFC 9112 §2.2: ignore empty lines before a request
                del buf[:2]
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise HttpError(431, "Request Header Fields Too Large")
                return None
            if end > MAX_HEAD_BYTES:
                raise HttpError(431, "Request Header Fields Too Large")
            self.head = _Head(bytes(buf[:end]))
            del buf[: end + 4]
            if self.head.expect and (self.head.chunked or len(buf) < self.head.length):
                assert self.transport is not None
                self.transport.write(_CONTINUE)
        head = self.head
        if head.chunked:
            done = _chunked_body(buf)
            if done is None:
                return None
            body, used = done
        else:
            if len(buf) < head.length:
                return None
            body, used = bytes(buf[: head.length]), head.length
        del buf[:used]
        self.head = None
        return Request(
            head.method, head.target, head.version, head.headers, body, self.peer, head.keep_alive
        )

    async def _serve(self, request: Request) -> None:
        try:
            response = await self.server.app(request)
        except Exception as exc:  # noqa: BLE001 - the app's own bug: the client still hears
            self.server.on_error(exc)
            response = Response(500, [("Content-Type", "text/plain")], b"Internal Server Error")
        self._write(request, response)
        self.busy = False
        if self.transport is None or self.transport.is_closing():
            return
        if not request.keep_alive:
            self.transport.close()
            return
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        self._next()

    def _write(self, request: Request, response: Response) -> None:
        if self.transport is None or self.transport.is_closing():
            return  # the client left; like API Gateway, the function's work still counts
        head_only = request.method == "HEAD"
        self.transport.write(
            encode_response(response, keep_alive=request.keep_alive, head_only=head_only)
        )

    def _refuse(self, err: HttpError) -> None:
        if self.transport is None:
            return
        body = f"{err.status} {err.message}\n".encode()
        response = Response(err.status, [("Content-Type", "text/plain")], body)
        self.transport.write(encode_response(response, keep_alive=False, head_only=False))
        self.transport.close()


_REASONS = {s.value: s.phrase for s in HTTPStatus}
_date_cache: tuple[int, str] = (0, "")


def _date() -> str:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


def encode_response(response: Response, *, keep_alive: bool, head_only: bool) -> bytes:
    """Status line, headers and body as one buffer (one send: the client wakes once)."""
    lines = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, '')}", f"Date: {_date()}"]
    lines += [f"{name}: {value}" for name, value in response.headers]
    lines.append(f"Content-Length: {len(response.body)}")
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


class HttpServer:
    """Serves ``app`` on its own thread and event loop until :meth:`close`.

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
        idle_timeout: float = IDLE_TIMEOUT_S,
        request_timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.on_error = on_error
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        # connections are checked on one timer, not a timer per request
        self._sweep_every = min(1.0, idle_timeout / 4, request_timeout / 4)
        self.sock = socket.create_server((host, port), backlog=backlog)
        self.server_address: tuple[Any, ...] = self.sock.getsockname()
        self.loop = asyncio.new_event_loop()
        self.connections: set[_Connection] = set()
        self._thread = threading.Thread(target=self._run, name="http-front", daemon=True)
        self._started = False

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(
            loop.create_server(lambda: _Connection(self), sock=self.sock)
        )
        loop.call_later(self._sweep_every, self._sweep)
        try:
            loop.run_forever()
        finally:
            server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def _sweep(self) -> None:
        now = self.loop.time()
        for conn in list(self.connections):
            conn.expire(now)
        self.loop.call_later(self._sweep_every, self._sweep)

    def close(self) -> None:
        """Stop accepting, drop open connections and wait for the loop to finish."""
        if self._started and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        else:
            self.sock.close()
            self.loop.close()
