"""The local front's HTTP/1.1 server, spoken to over raw sockets: framing, keep-alive and
every request it must refuse without calling the app."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from asyncz.local.http1 import (
    IDLE_TIMEOUT_S,
    MAX_BODY_BYTES,
    REQUEST_TIMEOUT_S,
    HttpServer,
    Request,
    Response,
)

pytestmark = pytest.mark.unit


class _Echo:
    """Answers with what it was sent; ``/boom`` raises."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.errors: list[Exception] = []

    async def __call__(self, request: Request) -> Response:
        self.requests.append(request)
        if request.target == "/boom":
            raise RuntimeError("app bug")
        if request.target == "/slow":
            await asyncio.sleep(0.2)
        if request.target == "/slower":
            await asyncio.sleep(1.2)
        headers = [("X-Method", request.method), ("X-Target", request.target)]
        return Response(200, headers, request.body)


@contextmanager
def _running(
    idle_timeout: float = IDLE_TIMEOUT_S, request_timeout: float = REQUEST_TIMEOUT_S
) -> Iterator[tuple[HttpServer, _Echo]]:
    """A server for an echo app on a free port, closed at the end."""
    app = _Echo()
    server = HttpServer(
        app,
        "127.0.0.1",
        0,
        on_error=app.errors.append,
        idle_timeout=idle_timeout,
        request_timeout=request_timeout,
    )
    server.start()
    try:
        yield server, app
    finally:
        server.close()


@pytest.fixture
def served() -> Iterator[tuple[HttpServer, _Echo]]:
    with _running() as running:
        yield running


class _Client:
    """One raw connection to the server: send bytes, read whole responses in order."""

    def __init__(self, server: HttpServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5)
        self.buf = bytearray()  # what arrived beyond the responses read so far

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def _fill(self, what: str) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"connection closed mid-{what}: {bytes(self.buf)!r}"
        self.buf += chunk

    def read(self, head_only: bool = False) -> dict[str, Any]:
        """The next response (``head_only``: an answer to HEAD, which has no body)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill("response")
        head, _, _ = bytes(self.buf).partition(b"\r\n\r\n")
        del self.buf[: len(head) + 4]
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(": ")
            headers[name.lower()] = value
        length = 0 if head_only else int(headers["content-length"])
        while len(self.buf) < length:
            self._fill("body")
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return {"status": int(lines[0].split(" ")[1]), "headers": headers, "body": body}

    def closed(self) -> bool:
        """Whether the server closed the connection (after everything read so far)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def test_keep_alive_serves_pipelined_requests_in_order(served: tuple[HttpServer, _Echo]) -> None:
    server, app = served
    with _Client(server) as client:
        client.send(
            b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
            b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"
            b"GET /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        replies = [client.read() for _ in range(3)]
    assert [r["body"] for r in replies] == [b"one", b"two", b""]
    assert [r["headers"]["x-target"] for r in replies] == ["/slow", "/b", "/c?q=1"]
    assert all("connection" not in r["headers"] for r in replies)
    assert all(r["headers"]["date"].endswith("GMT") for r in replies)
    assert [r.peer for r in app.requests] == ["127.0.0.1"] * 3


def test_a_body_sent_a_byte_at_a_time_is_assembled(served: tuple[HttpServer, _Echo]) -> None:
    server, _ = served
    request = b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
    with _Client(server) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(request)):
            client.sock.send(request[i : i + 1])
        reply = client.read()
    assert reply["body"] == b"hello world"


def test_chunked_body_with_extensions_and_trailers_is_decoded(
    served: tuple[HttpServer, _Echo],
) -> None:
    server, app = served
    with _Client(server) as client:
        client.send(
            b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
            b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        first, second = client.read(), client.read()
    assert first["body"] == b"hello world"
    assert second["headers"]["x-target"] == "/after"
    assert ("Transfer-Encoding", "chunked") in app.requests[0].headers


def test_head_answers_the_length_without_the_body(served: tuple[HttpServer, _Echo]) -> None:
    server, _ = served
    with _Client(server) as client:
        client.send(
            b"HEAD /h HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"
            b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        head = client.read(head_only=True)
        after = client.read()
    assert head["headers"]["content-length"] == "4"
    assert after["headers"]["x-target"] == "/next"  # no stray body bytes between the two


@pytest.mark.parametrize(
    ("request_head", "closes"),
    [
        (b"GET /a HTTP/1.0\r\n\r\n", True),
        (b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", False),
        (b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\n", True),
        (b"GET /a HTTP/1.1\r\nConnection: Keep-Alive, Upgrade\r\n\r\n", False),
    ],
)
def test_connection_persistence_follows_the_version_and_connection_header(
    served: tuple[HttpServer, _Echo], request_head: bytes, closes: bool
) -> None:
    server, _ = served
    with _Client(server) as client:
        client.send(request_head)
        reply = client.read()
        assert reply["status"] == 200
        assert (reply["headers"].get("connection") == "close") is closes
        if closes:
            assert client.closed()
        else:
            client.send(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.read()["headers"]["x-target"] == "/again"


def test_a_half_closed_client_still_gets_its_answers(served: tuple[HttpServer, _Echo]) -> None:
    server, _ = served
    with _Client(server) as client:
        client.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        client.sock.shutdown(socket.SHUT_WR)
        replies = [client.read() for _ in range(2)]
        assert client.closed()
    assert [r["headers"]["x-target"] for r in replies] == ["/slow", "/b"]


def test_an_app_error_is_a_500_and_the_server_serves_on(served: tuple[HttpServer, _Echo]) -> None:
    server, app = served
    with _Client(server) as client:
        client.send(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.read()["status"] == 500
        assert client.read()["status"] == 200
    assert [str(e) for e in app.errors] == ["app bug"]


def test_a_client_that_leaves_mid_request_harms_no_one(served: tuple[HttpServer, _Echo]) -> None:
    server, app = served
    with _Client(server) as gone:
        gone.send(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
    with _Client(server) as quitter:
        quitter.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    with _Client(server) as client:
        client.send(b"GET /fine HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.read()["status"] == 200
    assert "/fine" in [r.target for r in app.requests]
    assert app.errors == []


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /a HTTP/1.1 extra\r\n\r\n", 400),
        (b"G@T /a HTTP/1.1\r\n\r\n", 400),
        (b"GET /a FTP/1.1\r\n\r\n", 400),
        (b"GET /a HTTP/2.0\r\n\r\n", 505),
        (b"GET /a HTTP/1.1\r\nNo colon here\r\n\r\n", 400),
        (b"GET /a HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400),  # obs-fold
        (b"GET /a HTTP/1.1\r\nX-A : 1\r\n\r\n", 400),  # space before the colon
        (b"GET /a HTTP/1.1\r\nX-A: 1\r2\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1), 413),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n", 413),
        (b"POST /a HTTP/1.1\r\nExpect: the-moon\r\nContent-Length: 1\r\n\r\nx", 417),
        (b"GET /a HTTP/1.1\r\nX-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n", 431),
        (b"GET /a HTTP/1.1\r\nX-Big: " + b"a" * (70 * 1024), 431),  # no end in sight
    ],
)
def test_a_request_it_cannot_frame_is_refused_and_the_connection_closed(
    served: tuple[HttpServer, _Echo], raw: bytes, status: int
) -> None:
    server, app = served
    with _Client(server) as client:
        client.send(raw)
        reply = client.read()
        assert reply["status"] == status
        assert reply["headers"]["connection"] == "close"
        assert client.closed()
    assert app.requests == []  # nothing half-understood reaches the function


def test_length_beside_chunked_is_read_as_chunked_and_then_the_connection_closes(
    served: tuple[HttpServer, _Echo],
) -> None:
    server, app = served
    with _Client(server) as client:
        client.send(
            b"POST /a HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\nok\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n"
        )
        reply = client.read()
        assert (reply["status"], reply["body"]) == (200, b"ok")
        assert reply["headers"]["connection"] == "close"
        assert client.closed()
    assert [r.target for r in app.requests] == ["/a"]


def test_leading_blank_lines_before_a_request_are_ignored(
    served: tuple[HttpServer, _Echo],
) -> None:
    server, _ = served
    with _Client(server) as client:
        client.send(b"\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.read()["status"] == 200


def test_close_drops_open_connections_and_frees_the_port() -> None:
    app = _Echo()
    server = HttpServer(app, "127.0.0.1", 0, on_error=app.errors.append)
    server.start()
    port = server.server_address[1]
    client = _Client(server)
    client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    client.read()
    server.close()
    assert client.closed()
    client.close()
    again = HttpServer(app, "127.0.0.1", port, on_error=app.errors.append)  # rebinds at once
    again.close()


def test_a_busy_port_fails_at_construction() -> None:
    app = _Echo()
    first = HttpServer(app, "127.0.0.1", 0, on_error=app.errors.append)
    try:
        with pytest.raises(OSError):
            HttpServer(app, "127.0.0.1", first.server_address[1], on_error=app.errors.append)
    finally:
        first.close()


# --- connections that hold the server -------------------------------------------------------


@pytest.fixture
def impatient() -> Iterator[tuple[HttpServer, _Echo]]:
    with _running(idle_timeout=0.4, request_timeout=0.4) as running:
        yield running


def test_a_kept_alive_connection_left_idle_is_closed(
    impatient: tuple[HttpServer, _Echo],
) -> None:
    server, _ = impatient
    with _Client(server) as client:
        client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.read()["status"] == 200
        assert client.closed()  # blocks until the server closes it (the socket timeout is 5 s)
        assert client.buf == b""  # closed without a word: there was no request to answer


def test_a_request_that_stops_arriving_is_answered_408_and_closed(
    impatient: tuple[HttpServer, _Echo],
) -> None:
    server, app = impatient
    with _Client(server) as client:
        client.send(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        reply = client.read()
        assert reply["status"] == 408
        assert reply["headers"]["connection"] == "close"
        assert client.closed()
    with _Client(server) as client:  # a head that never ends, sent a byte at a time
        client.send(b"GET /b HTTP/1.1\r\n")
        for _ in range(200):  # each byte within the timeout: trickling does not extend it
            try:
                client.send(b"X")
            except OSError:
                break
            threading.Event().wait(0.05)
        assert client.read()["status"] == 408
    assert app.requests == []


def test_a_request_the_app_takes_long_to_answer_is_not_cut(
    impatient: tuple[HttpServer, _Echo],
) -> None:
    server, app = impatient
    with _Client(server) as client:
        client.send(b"GET /slower HTTP/1.1\r\nHost: x\r\n\r\n")  # the app takes 1.2 s
        assert client.read()["status"] == 200
        client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")  # and the connection lives on
        assert client.read()["status"] == 200
    assert [r.target for r in app.requests] == ["/slower", "/a"]
