"""A local stand-in for API Gateway (REST API, Lambda proxy integration).

Each HTTP request becomes a REST v1 proxy event for the resource ``/{proxy+}`` (``/`` for the
root), is handed to an idle api sandbox, and the handler's proxy response is written back. Like
API Gateway it answers 502 when the function fails or returns garbage, and 504 after 29 s.
"""

from __future__ import annotations

import base64
import binascii
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from asyncz.local.sandbox import ACCOUNT_ID, log_line

INTEGRATION_TIMEOUT_S = 29.0
TEXT_TYPES = (
    "text/",
    "application/json",
    "+json",
    "application/xml",
    "+xml",
    "application/x-www-form-urlencoded",
    "application/javascript",
    "application/graphql",
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"}


# --------------------------------------------------------------------------- request → event


def is_text(content_type: str | None) -> bool:
    """Whether a body of this content type travels as text (else base64, as binary media)."""
    if not content_type:
        return True
    ctype = content_type.split(";", 1)[0].strip().lower()
    return any(marker in ctype for marker in TEXT_TYPES)


def encode_body(body: bytes, content_type: str | None) -> tuple[str | None, bool]:
    """The event's ``body`` and ``isBase64Encoded`` for a raw request body."""
    if not body:
        return None, False
    if is_text(content_type):
        try:
            return body.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), True


def _single_and_multi(
    pairs: Iterable[tuple[str, str]],
) -> tuple[dict[str, str], dict[str, list[str]]]:
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    spelled: dict[str, str] = {}  # header names are case-insensitive: keep the first spelling
    for name, value in pairs:
        key = spelled.setdefault(name.lower(), name)
        single[key] = value  # API Gateway: the last value wins in the single-value map
        multi.setdefault(key, []).append(value)
    return single, multi


def build_event(
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    source_ip: str = "127.0.0.1",
    stage: str = "local",
    request_id: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Build the REST API (v1) Lambda proxy event API Gateway would send for this request."""
    request_id = request_id or str(uuid.uuid4())
    now = time.time() if now is None else now
    split = urlsplit(target)
    path = unquote(split.path or "/")
    pairs = list(headers)
    header_map, multi_headers = _single_and_multi(pairs)
    lower = {k.lower(): v for k, v in header_map.items()}
    query = parse_qsl(split.query, keep_blank_values=True)
    qs_single, qs_multi = ({k: v for k, v in query}, _multi(query)) if query else (None, None)
    body_text, is_b64 = encode_body(body, lower.get("content-type"))
    resource = "/" if path == "/" else "/{proxy+}"
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method.upper(),
        "headers": header_map or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": qs_single,
        "multiValueQueryStringParameters": qs_multi,
        "pathParameters": None if path == "/" else {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourceId": "local",
            "resourcePath": resource,
            "httpMethod": method.upper(),
            "extendedRequestId": request_id,
            "requestTime": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "path": f"/{stage}{path}",
            "accountId": ACCOUNT_ID,
            "protocol": "HTTP/1.1",
            "stage": stage,
            "domainPrefix": "localhost",
            "requestTimeEpoch": int(now * 1000),
            "requestId": request_id,
            "identity": {
                "cognitoIdentityPoolId": None,
                "accountId": None,
                "cognitoIdentityId": None,
                "caller": None,
                "sourceIp": source_ip,
                "principalOrgId": None,
                "accessKey": None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
                "userArn": None,
                "userAgent": lower.get("user-agent"),
                "user": None,
                "apiKey": lower.get("x-api-key"),
                "apiKeyId": None,
            },
            "domainName": lower.get("host", "localhost"),
            "apiId": "local",
        },
        "body": body_text,
        "isBase64Encoded": is_b64,
    }


def _multi(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    multi: dict[str, list[str]] = {}
    for key, value in pairs:
        multi.setdefault(key, []).append(value)
    return multi


# --------------------------------------------------------------------------- result → response


class BadResponseError(ValueError):
    """The function returned something API Gateway cannot turn into a response."""


def parse_result(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of a proxy-integration response (as API Gateway maps it)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        raise BadResponseError("missing statusCode")
    try:
        status = int(result["statusCode"])
    except (TypeError, ValueError) as exc:
        raise BadResponseError("statusCode is not an integer") from exc
    multi = result.get("multiValueHeaders") or {}
    single = result.get("headers") or {}
    if not isinstance(multi, dict) or not isinstance(single, dict):
        raise BadResponseError("headers must be objects")
    # Both maps merge; a name in multiValueHeaders takes its values from there only.
    out: list[tuple[str, str]] = []
    multi_names = {str(name).lower() for name in multi}
    for name, value in single.items():
        if str(name).lower() not in multi_names:
            out.append((str(name), str(value)))
    for name, values in multi.items():
        for value in values if isinstance(values, list) else [values]:
            out.append((str(name), str(value)))
    body = result.get("body")
    if body is None:
        raw = b""
    elif result.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(str(body), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadResponseError("body is not valid base64") from exc
    else:
        raw = str(body).encode("utf-8")
    return status, [(k, v) for k, v in out if k.lower() not in HOP_BY_HOP], raw


def gateway_error(status: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = json.dumps({"message": message}).encode()
    return status, [("Content-Type", "application/json"), ("x-amzn-ErrorType", message)], body


# --------------------------------------------------------------------------- api sandbox pools


class ApiBackend(Protocol):
    """Runs the api function for one event; raises ``TimeoutError`` or returns the reply."""

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None: ...


class SandboxPool:
    """Api sandboxes; each takes one request at a time, like Lambda execution environments."""

    def __init__(self, sandboxes: list[Any], respawn: Callable[[Any], Any]) -> None:
        self._idle: queue.Queue[Any] = queue.Queue()
        self._respawn = respawn
        self._lock = threading.Lock()
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
        self._idle.put(sandbox)

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        started = time.monotonic()
        try:
            sandbox = self._idle.get(timeout=timeout_s)
        except queue.Empty as exc:
            raise TimeoutError("no api sandbox became free") from exc
        try:
            remaining = max(0.1, timeout_s - (time.monotonic() - started))
            reply: dict[str, Any] = sandbox.invoke(
                event, timeout_s, request_id=event["requestContext"]["requestId"], wait_s=remaining
            )
            return reply
        finally:
            if not sandbox.alive():  # crashed or timed out: a fresh one takes its place
                with self._lock:
                    self._all.remove(sandbox)
                self.add(self._respawn(sandbox))
            else:
                self._idle.put(sandbox)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandboxes, self._all = self._all, []
        for sandbox in sandboxes:
            sandbox.stop(grace_s=2)


# --------------------------------------------------------------------------- HTTP server


class _GatewayServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    backend: ApiBackend
    stage: str
    access_log: bool


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True
    # Buffer the response: status line, headers and body leave in one send when the request
    # is done (``handle_one_request`` flushes), not one per write (the client would wake
    # for the headers, then again for the body).
    wbufsize = 64 * 1024
    server: _GatewayServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # we write one structured access line per request instead

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # the client waits for "100 Continue" before it sends the body
        return answered

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _proxy(self) -> None:
        started = time.monotonic()
        request_id = str(uuid.uuid4())
        body = self._read_body()
        event = build_event(
            self.command,
            self.path,
            self.headers.items(),
            body,
            source_ip=self.client_address[0],
            stage=self.server.stage,
            request_id=request_id,
        )
        fwd = self.headers.get("X-Forwarded-For")
        extra = {
            "X-Forwarded-For": f"{fwd}, {self.client_address[0]}"
            if fwd
            else self.client_address[0],
            "X-Forwarded-Proto": "http",
            "X-Forwarded-Port": str(self.server.server_address[1]),
        }
        event["headers"] = {**(event["headers"] or {}), **extra}
        event["multiValueHeaders"] = {
            **(event["multiValueHeaders"] or {}),
            **{k: [v] for k, v in extra.items()},
        }
        try:
            reply = self.server.backend.invoke(event, INTEGRATION_TIMEOUT_S)
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
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        if self.server.access_log:
            log_line(
                "gateway",
                f"{self.command} {self.path} {status}",
                request_id=request_id,
                status=status,
                ms=round((time.monotonic() - started) * 1000, 1),
            )

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _proxy


class Gateway:
    """The HTTP front: serves until :meth:`close`, on a background thread."""

    def __init__(
        self,
        backend: ApiBackend,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        stage: str = "local",
        access_log: bool = True,
    ) -> None:
        self.server = _GatewayServer((host, port), _ProxyHandler)
        self.server.backend = backend
        self.server.stage = stage
        self.server.access_log = access_log
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.1,), name="gateway", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
