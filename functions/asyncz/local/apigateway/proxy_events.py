"""API Gateway's Lambda proxy integration, both ways: an HTTP request as the proxy event it
becomes (the REST API's v1 event, resource ``/{proxy+}``; or the HTTP API's payload format
2.0, route ``$default``), and a handler's proxy result as the HTTP response (502 for
garbage, as API Gateway answers)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from asyncz.local.context import ACCOUNT_ID

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


def build_http_event(
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    source_ip: str = "127.0.0.1",
    request_id: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The HTTP API (payload format 2.0) event for this request: lower-case headers (a
    repeated one joined by commas), the raw query, repeated query keys joined by commas,
    cookies apart, the ``$default`` route and stage."""
    request_id = request_id or str(uuid.uuid4())
    now = time.time() if now is None else now
    split = urlsplit(target)
    path = unquote(split.path or "/")
    joined: dict[str, list[str]] = {}
    for name, value in headers:
        joined.setdefault(name.lower(), []).append(value)
    cookies = [c.strip() for v in joined.pop("cookie", []) for c in v.split(";") if c.strip()]
    header_map = {name: ",".join(values) for name, values in joined.items()}
    body_text, is_b64 = encode_body(body, header_map.get("content-type"))
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": split.query,
        "headers": header_map,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": "local",
            "domainName": header_map.get("host", "localhost"),
            "domainPrefix": "localhost",
            "http": {
                "method": method.upper(),
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": header_map.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": request_time(now),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": is_b64,
    }
    if cookies:
        event["cookies"] = cookies
    if split.query:
        query = _multi(parse_qsl(split.query, keep_blank_values=True))
        event["queryStringParameters"] = {k: ",".join(vs) for k, vs in query.items()}
    if body_text is not None:
        event["body"] = body_text
    return event


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
    cookies = result.get("cookies") or []  # payload format 2.0 returns Set-Cookie apart
    pairs.extend(("Set-Cookie", cookie) for cookie in cookies if isinstance(cookies, list))
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
