"""A stand-in API for the ops commands' tests (stdlib HTTP server, no database), and the
fixture that points ``asyncz`` at it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class FakeApi:
    """Records requests; answers from ``routes[(method, path)]`` (a list pops per call)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.routes: dict[tuple[str, str], Any] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path, _, query = self.path.partition("?")
                api.requests.append(
                    {
                        "method": self.command,
                        "path": path,
                        "query": query,
                        "body": body,
                        "key": self.headers.get("x-api-key"),
                    }
                )
                answer = api.routes.get(
                    (self.command, path), (404, {"error": "not_found", "message": "no route"})
                )
                if isinstance(answer, list):
                    answer = answer.pop(0) if len(answer) > 1 else answer[0]
                status, payload = answer
                raw = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    fake = FakeApi()
    monkeypatch.setenv("ASYNCZ_API_URL", fake.url)
    monkeypatch.setenv("ASYNCZ_API_KEY", "k-123")
    yield fake
    fake.server.shutdown()
    fake.server.server_close()
