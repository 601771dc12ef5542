"""A local Lambda ``Invoke`` API (async invocations only), so boto3 code paths run unchanged.

The sandboxes get ``AWS_ENDPOINT_URL_LAMBDA`` pointing here: ``lambda.invoke(FunctionName=...,
InvocationType="Event")`` from the api (waking a worker) or the real fleet handler lands in
the runner, which starts a worker invocation in a local sandbox.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from asyncz.local.context import log_line

INVOKE_PREFIX = "/2015-03-31/functions/"


def function_name_of(path: str) -> str | None:
    """``my-fn`` from ``/2015-03-31/functions/<name or ARN>/invocations``."""
    if not path.startswith(INVOKE_PREFIX) or not path.split("?")[0].endswith("/invocations"):
        return None
    name = unquote(path[len(INVOKE_PREFIX) :].split("?")[0].rsplit("/invocations", 1)[0])
    if name.startswith("arn:"):
        parts = name.split(":")
        return parts[6] if len(parts) > 6 else None
    return name.split(":")[0]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    functions: dict[str, Callable[[], object]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: dict[str, Any] | None = None, error: str = "") -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if error:  # how botocore learns the exception class
            self.send_header("X-Amzn-ErrorType", error)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        name = function_name_of(self.path)
        start = self.server.functions.get(name or "")
        if start is None:
            message = f"Function not found: {name}"
            self._reply(404, {"Type": "User", "message": message}, "ResourceNotFoundException")
            return
        if (self.headers.get("X-Amz-Invocation-Type") or "RequestResponse") != "Event":
            message = "only InvocationType=Event is supported locally"
            self._reply(400, {"Type": "User", "message": message}, "InvalidParameterValueException")
            return
        log_line("lambda", "async invoke", function=name)
        start()
        self._reply(202)


class LambdaEndpoint:
    """Serves async Invoke for the named functions on a free 127.0.0.1 port."""

    def __init__(self, functions: dict[str, Callable[[], object]], port: int = 0) -> None:
        self.server = _Server(("127.0.0.1", port), _Handler)
        self.server.functions = functions
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.1,), name="lambda-endpoint", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
