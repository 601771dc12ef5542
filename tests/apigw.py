"""Build API Gateway REST (v1) proxy events and a Lambda context, as API Gateway sends them."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class FakeContext:
    function_name: str = "asyncz-api"
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:asyncz-api"
    log_group_name: str = "/aws/lambda/asyncz-api"
    log_stream_name: str = "2026/12/02/[$LATEST]0"
    deadline: float = field(default_factory=lambda: time.monotonic() + 30)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


def rest_event(
    method: str,
    target: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw_body: bytes | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    hdrs = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "User-Agent": "pytest"}
    if body is not None:
        raw_body = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    if api_key is not None:
        hdrs["x-api-key"] = api_key
    hdrs.update(headers or {})
    is_b64 = False
    text: str | None = None
    if raw_body is not None:
        try:
            text = raw_body.decode("utf-8")
        except UnicodeDecodeError:
            text, is_b64 = base64.b64encode(raw_body).decode(), True
    mv_query: dict[str, list[str]] = {}
    for k, v in query:
        mv_query.setdefault(k, []).append(v)
    return {
        "resource": "/{proxy+}",
        "path": parts.path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": {k: v[-1] for k, v in mv_query.items()} or None,
        "multiValueQueryStringParameters": mv_query or None,
        "pathParameters": {"proxy": parts.path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{parts.path}",
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "accountId": "000000000000",
            "apiId": "abc123",
            "protocol": "HTTP/1.1",
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": "pytest", "apiKey": api_key},
        },
        "body": text,
        "isBase64Encoded": is_b64,
    }


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(handler: Any, method: str, target: str, **kwargs: Any) -> Reply:
    out = handler(rest_event(method, target, **kwargs), FakeContext())
    raw = out.get("body") or ""
    data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    for k, vs in (out.get("multiValueHeaders") or {}).items():
        headers[k.lower()] = vs[-1]
    return Reply(out["statusCode"], headers, data)
