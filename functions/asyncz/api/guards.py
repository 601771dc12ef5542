"""Guards that run before anything parses a body: API key, body size, media type, nesting.

A pure ASGI middleware (cheap per request) asks the gate (:mod:`asyncz.api.access`) who the
key is and whether it may, buffers the body once, rejects what must never reach the JSON
parser, then replays the body downstream. The key check is a plain function too: the api
handler runs it before refusing a body Mangum could not decode.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import accumulate, count
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from asyncz.api.replies import Reply, error_reply, json_response

MAX_JSON_DEPTH = 64
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/ui", "/ui/"})
# the dashboard's and the docs' static files: a browser loads them without a key
PUBLIC_PREFIXES = ("/ui/assets/", "/docs/assets/")


def is_public(path: str) -> bool:
    """Paths that need no key: health, the docs, the dashboard's pages (not its data)."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[{]}")
_OPENER_TWO = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when brackets outside strings nest deeper than ``limit``.

    Linear, in C loops rather than a byte-wise Python one: a body with no more openers than
    ``limit`` cannot be too deep;
    otherwise escaped backslashes and quotes are dropped, so every remaining quote opens or
    closes a string, the text between every other pair of quotes (the strings) is cut
    out, and the brackets left are scanned until one is deeper than ``limit``: with an
    opener counted 2 and a closer 0, the depth after k brackets is their sum minus k.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    weights = outside.translate(None, _NOT_BRACKET).translate(_OPENER_TWO)
    depths = map(operator.sub, accumulate(weights), count(1))
    return any(map(partial(operator.lt, limit), depths))


UNAUTHORIZED = error_reply(401, "unauthorized", "missing or invalid API key (x-api-key)")


def header_map(raw: Iterable[Sequence[bytes]]) -> dict[str, str]:
    """An ASGI scope's headers by lower-case name, decoded as ASGI header bytes are
    (ISO-8859-1); the last of a repeated header wins."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


def key_rejection(
    path: str, headers: Mapping[str, str], key_ok: Callable[[str], bool]
) -> Reply | None:
    """``UNAUTHORIZED`` when ``path`` needs a key and ``headers`` (lower-case names) carry no
    accepted one, else ``None``."""
    if is_public(path):
        return None
    key = headers.get("x-api-key")
    return None if key and key_ok(key) else UNAUTHORIZED


def too_large(max_body_bytes: int) -> Reply:
    return error_reply(
        413, "payload_too_large", f"the body exceeds {max_body_bytes} bytes",
        max_bytes=max_body_bytes,
    )  # fmt: skip


def body_rejection(headers: Mapping[str, str], body: bytes, max_body_bytes: int) -> Reply | None:
    """Why a write's body must not reach the JSON parser, or ``None``. ``headers`` have
    lower-case names."""
    if len(body) > max_body_bytes:
        return too_large(max_body_bytes)
    if not body.strip():
        return None
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return error_reply(415, "unsupported_media_type", "send the body as application/json")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return error_reply(422, "invalid_utf8", "the body is not valid UTF-8")
    if json_depth_exceeds(body):
        return error_reply(422, "json_too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels")
    return None


# Who a request is (its key's principal) and what it may do: a Reply refuses it, a
# principal (or None on a public path) lets it through.
Gate = Callable[[str, str, Mapping[str, str]], Awaitable[Reply | Any]]


class InputGuard:
    def __init__(self, app: ASGIApp, max_body_bytes: int, gate: Gate) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = header_map(scope["headers"])
        admitted = await self.gate(scope["method"], scope["path"], headers)
        if isinstance(admitted, Reply):
            await json_response(admitted)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = admitted
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await json_response(too_large(self.max_body_bytes))(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await json_response(too_large(self.max_body_bytes))(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        rejection = body_rejection(headers, body, self.max_body_bytes)
        if rejection is not None:
            await json_response(rejection)(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
