"""Guards that run before FastAPI parses anything: API key, body size, media type, nesting.

A pure ASGI middleware (cheap per request): it checks the key, buffers the body once,
rejects what must never reach the JSON parser, then replays the body downstream.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_JSON_DEPTH = 64
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when brackets outside strings nest deeper than ``limit`` (linear scan)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class InputGuard:
    def __init__(self, app: ASGIApp, max_body_bytes: int, key_ok: Callable[[str], bool]) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.key_ok = key_ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] not in PUBLIC_PATHS:
            key = headers.get("x-api-key")
            if not key or not self.key_ok(key):
                await _reply(send, 401, "unauthorized", "missing or invalid API key (x-api-key)")
                return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await _reply(
                send, 413, "payload_too_large", f"the body exceeds {self.max_body_bytes} bytes"
            )
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _reply(
                    send, 413, "payload_too_large", f"the body exceeds {self.max_body_bytes} bytes"
                )
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body.strip():
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json" and not media.endswith("+json"):
                await _reply(
                    send, 415, "unsupported_media_type", "send the body as application/json"
                )
                return
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                await _reply(send, 422, "invalid_utf8", "the body is not valid UTF-8")
                return
            if json_depth_exceeds(body):
                await _reply(
                    send, 422, "json_too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels"
                )
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
