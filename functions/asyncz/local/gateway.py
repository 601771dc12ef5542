"""A local stand-in for API Gateway (REST API, Lambda proxy integration).

Each HTTP request becomes a REST v1 proxy event for the resource ``/{proxy+}`` (``/`` for the
root), is handed to an idle api sandbox, and the handler's proxy response is written back. Like
API Gateway it answers 502 when the function fails or returns garbage, and 504 after 29 s.

Everything here runs on one event loop (uvicorn's, :mod:`asyncz.local.front`): a request
waits for a free sandbox and for its reply without holding a thread; the loop watches each
sandbox's pipe.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from asyncz.local.front import HttpServer, Request, Response
from asyncz.local.sandbox import ACCOUNT_ID, log_line, running_loop

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
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
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


def _header_maps(
    pairs: Iterable[tuple[str, str]],
) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """The event's single- and multi-value header maps, and the last value by lower-case name."""
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    lower: dict[str, str] = {}
    spelled: dict[str, str] = {}  # header names are case-insensitive: keep the first spelling
    for name, value in pairs:
        low = name.lower()
        key = spelled.setdefault(low, name)
        single[key] = lower[low] = value  # API Gateway: the last value wins in the single map
        if key in multi:
            multi[key].append(value)
        else:
            multi[key] = [value]
    return single, multi, lower


_request_time: tuple[int, str] = (0, "")


def request_time(now: float) -> str:
    """``requestContext.requestTime`` (one ``strftime`` per second, not per request)."""
    global _request_time
    second = int(now)
    cached = _request_time
    if cached[0] != second:
        text = datetime.fromtimestamp(second, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
        cached = _request_time = (second, text)
    return cached[1]


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
    header_map, multi_headers, lower = _header_maps(headers)
    query = parse_qsl(split.query, keep_blank_values=True) if split.query else []
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
            "requestTime": request_time(now),
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
    pairs: list[tuple[str, Any]] = [(str(name), value) for name, value in single.items()]
    if multi:
        taken = {str(name).lower() for name in multi}
        pairs = [pair for pair in pairs if pair[0].lower() not in taken]
        for name, values in multi.items():
            pairs.extend((str(name), v) for v in (values if isinstance(values, list) else [values]))
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
    kept: list[tuple[str, str]] = []
    for name, value in pairs:
        if name.lower() in HOP_BY_HOP:
            continue
        text = str(value)
        # a line break would split the response; API Gateway refuses such a result too
        if not _HEADER_NAME.fullmatch(name) or _BAD_VALUE.search(text):
            raise BadResponseError(f"header {name!r} cannot be sent")
        if not text.isascii():
            try:
                text.encode("latin-1")
            except UnicodeEncodeError as exc:
                raise BadResponseError(f"header {name!r} is not ISO-8859-1") from exc
        kept.append((name, text))
    return status, kept, raw


def gateway_error(status: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = json.dumps({"message": message}).encode()
    return status, [("Content-Type", "application/json"), ("x-amzn-ErrorType", message)], body


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

    ``backend`` may be swapped while serving (the runner starts with a placeholder).
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
            log_line(
                "gateway",
                f"{request.method} {request.target} {status}",
                request_id=request_id,
                status=status,
                ms=round((time.monotonic() - started) * 1000, 1),
            )
        return Response(status, [*headers, ("x-amzn-RequestId", request_id)], payload)
