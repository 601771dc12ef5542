"""A webhook endpoint on this machine for the tests: answers each POST with the next status
of its script (then ``default``), records what arrived, and can hold every answer until
released (a dead or slow endpoint)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        return list(self.received)


@contextmanager
def receiver(
    statuses: Sequence[int] = (), *, default: int = 200, hold: threading.Event | None = None,
    hold_seconds: float = 60.0,
) -> Iterator[Receiver]:  # fmt: skip
    script = list(statuses)
    lock = threading.Lock()
    box: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if hold is not None:
                hold.wait(hold_seconds)
            with lock:
                status = script.pop(0) if script else default
            got = box["r"]
            with got.arrived:
                got.received.append(Received(dict(self.headers.items()), body))
                got.arrived.notify_all()
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box["r"] = Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box["r"]
    finally:
        if hold is not None:
            hold.set()
        server.shutdown()
        server.server_close()
