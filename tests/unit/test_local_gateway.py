"""The local API Gateway front: request → REST v1 proxy event → response (recorded events)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from mangum import Mangum

from asyncz.local.apigateway.gateway import Gateway
from asyncz.local.apigateway.proxy_events import (
    BadResponseError,
    build_event,
    build_http_event,
    encode_body,
    parse_result,
)
from asyncz.local.context import LambdaContext
from asyncz.local.lambda_.pool import SandboxPool
from asyncz.local.lambda_.sandbox import SandboxTimeoutError

pytestmark = pytest.mark.unit

# Recorded from a REST API (proxy resource, stage "local"):
#   curl -H 'x-api-key: k1' -H 'X-Tag: a' -H 'X-Tag: b' \
#        'https://abc123.execute-api.us-east-1.amazonaws.com/local/jobs?status=queued&status=dead&limit=10&q=a%20b'
# Volatile ids, times and the X-Amzn-Trace-Id / CloudFront headers are trimmed.
RECORDED_GET = {
    "resource": "/{proxy+}",
    "path": "/jobs",
    "httpMethod": "GET",
    "headers": {
        "Host": "abc123.execute-api.us-east-1.amazonaws.com",
        "User-Agent": "curl/8.5.0",
        "Accept": "*/*",
        "x-api-key": "k1",
        "X-Tag": "b",
    },
    "multiValueHeaders": {
        "Host": ["abc123.execute-api.us-east-1.amazonaws.com"],
        "User-Agent": ["curl/8.5.0"],
        "Accept": ["*/*"],
        "x-api-key": ["k1"],
        "X-Tag": ["a", "b"],
    },
    "queryStringParameters": {"status": "dead", "limit": "10", "q": "a b"},
    "multiValueQueryStringParameters": {
        "status": ["queued", "dead"],
        "limit": ["10"],
        "q": ["a b"],
    },
    "pathParameters": {"proxy": "jobs"},
    "stageVariables": None,
    "requestContext": {
        "resourcePath": "/{proxy+}",
        "httpMethod": "GET",
        "path": "/local/jobs",
        "protocol": "HTTP/1.1",
        "stage": "local",
        "identity": {"sourceIp": "203.0.113.7", "userAgent": "curl/8.5.0", "apiKey": "k1"},
        "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
    },
    "body": None,
    "isBase64Encoded": False,
}

# POST /jobs/5d1c.../attempts with a binary body, the API having binaryMediaTypes */*.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
RECORDED_BINARY_POST = {
    "resource": "/{proxy+}",
    "path": "/jobs/5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b/attempts",
    "httpMethod": "POST",
    "headers": {"Content-Type": "image/png", "Content-Length": str(len(PNG))},
    "multiValueHeaders": {"Content-Type": ["image/png"], "Content-Length": [str(len(PNG))]},
    "queryStringParameters": None,
    "multiValueQueryStringParameters": None,
    "pathParameters": {"proxy": "jobs/5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b/attempts"},
    "body": base64.b64encode(PNG).decode(),
    "isBase64Encoded": True,
}

# What Mangum 0.22 returned for a FastAPI response setting two cookies, as logged.
RECORDED_MANGUM_RESPONSE = {
    "statusCode": 202,
    "headers": {"content-length": "56", "content-type": "application/json"},
    "multiValueHeaders": {"set-cookie": ["a=1; Path=/", "b=2; Path=/"]},
    "body": '{"job_id":"5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b","status":"queued"}',
    "isBase64Encoded": False,
}


def _subset(actual: Any, expected: Any, where: str = "event") -> None:
    """Every key of ``expected`` is in ``actual`` with an equal value (recursively)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            _subset(actual[key], value, f"{where}.{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def test_get_with_multi_value_headers_and_query_matches_recorded_event() -> None:
    headers = [
        ("Host", "abc123.execute-api.us-east-1.amazonaws.com"),
        ("User-Agent", "curl/8.5.0"),
        ("Accept", "*/*"),
        ("x-api-key", "k1"),
        ("X-Tag", "a"),
        ("X-Tag", "b"),
    ]
    event = build_event(
        "GET",
        "/jobs?status=queued&status=dead&limit=10&q=a%20b",
        headers,
        b"",
        source_ip="203.0.113.7",
        now=1_790_000_000.0,
    )
    _subset(event, RECORDED_GET)
    assert event["requestContext"]["requestTimeEpoch"] == 1_790_000_000_000
    assert event["requestContext"]["requestId"] == event["requestContext"]["extendedRequestId"]
    assert event["requestContext"]["requestTime"] == "21/Sep/2026:14:13:20 +0000"
    # the text is kept for a second, and only for that second
    later = build_event("GET", "/", [], b"", now=1_790_000_000.9)["requestContext"]
    assert later["requestTime"] == "21/Sep/2026:14:13:20 +0000"
    later = build_event("GET", "/", [], b"", now=1_790_000_001.0)["requestContext"]
    assert later["requestTime"] == "21/Sep/2026:14:13:21 +0000"


def test_binary_body_is_base64_encoded_and_path_params_keep_the_whole_proxy_path() -> None:
    headers = [("Content-Type", "image/png"), ("Content-Length", str(len(PNG)))]
    event = build_event("POST", RECORDED_BINARY_POST["path"], headers, PNG)  # type: ignore[arg-type]
    _subset(event, RECORDED_BINARY_POST)
    assert base64.b64decode(event["body"]) == PNG


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", b'{"a": 1}', ('{"a": 1}', False)),
        ("application/json; charset=utf-8", "é".encode(), ("é", False)),
        ("text/plain", b"\xff\xfe", (base64.b64encode(b"\xff\xfe").decode(), True)),
        ("application/octet-stream", b"abc", ("YWJj", True)),
        ("application/vnd.api+json", b"{}", ("{}", False)),
        (None, b"plain", ("plain", False)),
        ("application/json", b"", (None, False)),
    ],
)
def test_encode_body(content_type: str | None, body: bytes, expected: tuple[Any, bool]) -> None:
    assert encode_body(body, content_type) == expected


def test_root_path_uses_root_resource_without_path_parameters() -> None:
    event = build_event("GET", "/", [("Host", "x")], b"")
    assert event["resource"] == "/"
    assert event["pathParameters"] is None
    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None
    assert event["requestContext"]["path"] == "/local/"


def test_percent_encoded_path_and_blank_query_values_are_decoded_like_api_gateway() -> None:
    event = build_event("GET", "/jobs/a%2Fb%20c?cursor=&task=echo%2Bx", [], b"")
    assert event["path"] == "/jobs/a/b c"
    assert event["pathParameters"] == {"proxy": "jobs/a/b c"}
    assert event["queryStringParameters"] == {"cursor": "", "task": "echo+x"}


def test_header_names_are_merged_case_insensitively_keeping_the_first_spelling() -> None:
    event = build_event("GET", "/x", [("Accept", "a/b"), ("accept", "c/d")], b"")
    assert event["headers"] == {"Accept": "c/d"}
    assert event["multiValueHeaders"] == {"Accept": ["a/b", "c/d"]}


def test_parse_recorded_mangum_response_keeps_every_set_cookie() -> None:
    status, headers, body = parse_result(RECORDED_MANGUM_RESPONSE)
    assert status == 202
    assert ("set-cookie", "a=1; Path=/") in headers
    assert ("set-cookie", "b=2; Path=/") in headers
    assert ("content-type", "application/json") in headers
    assert not any(name.lower() == "content-length" for name, _ in headers)  # recomputed
    assert json.loads(body)["status"] == "queued"


def test_parse_result_merges_headers_with_multi_value_taking_precedence() -> None:
    result = {
        "statusCode": "200",
        "headers": {"X-A": "single", "X-B": "only-single"},
        "multiValueHeaders": {"x-a": ["m1", "m2"]},
        "body": base64.b64encode(PNG).decode(),
        "isBase64Encoded": True,
    }
    status, headers, body = parse_result(result)
    assert status == 200
    assert sorted(headers) == [("X-B", "only-single"), ("x-a", "m1"), ("x-a", "m2")]
    assert body == PNG


@pytest.mark.parametrize(
    "bad",
    [
        None,
        {"body": "x"},
        {"statusCode": "abc"},
        {"statusCode": 200, "headers": ["x"]},
        {"statusCode": 200, "body": "!!", "isBase64Encoded": True},
        # a line break in a header would split the response (header injection)
        {"statusCode": 200, "headers": {"X-A": "1\r\nSet-Cookie: evil=1"}},
        {"statusCode": 200, "multiValueHeaders": {"X-A": ["ok", "2\nX-B: 3"]}},
        {"statusCode": 200, "headers": {"Bad Name": "1"}},
        {"statusCode": 200, "headers": {"X-Snow": "\u2603"}},  # not ISO-8859-1
    ],
)
def test_parse_result_rejects_what_api_gateway_would_502(bad: Any) -> None:
    with pytest.raises(BadResponseError):
        parse_result(bad)


def test_mangum_fastapi_app_sees_the_request_as_sent() -> None:
    app = FastAPI()

    @app.post("/jobs/{job_id}/attempts")
    async def attempts(job_id: str, request: Request) -> Response:
        raw = await request.body()
        return Response(
            content=raw[::-1],
            media_type="application/octet-stream",
            headers={"x-job": job_id, "x-query": str(request.query_params.multi_items())},
        )

    handler = Mangum(app, lifespan="off")
    event = build_event(
        "POST",
        "/jobs/j1/attempts?x=1&x=2",
        [("Content-Type", "image/png"), ("Host", "127.0.0.1:8000")],
        PNG,
    )
    asyncio.set_event_loop(asyncio.new_event_loop())
    result = handler(copy.deepcopy(event), LambdaContext("api", 29))
    status, headers, body = parse_result(result)
    assert status == 200
    assert body == PNG[::-1]
    assert ("x-job", "j1") in headers
    assert ("x-query", "[('x', '1'), ('x', '2')]") in headers
    asyncio.get_event_loop().close()


class _FakeBackend:
    """Stands in for the api sandboxes: answers from a function of the event."""

    def __init__(self, respond: Any) -> None:
        self.respond = respond
        self.events: list[dict[str, Any]] = []

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.events.append(event)
        reply: Any = self.respond(event)
        if asyncio.iscoroutine(reply):
            reply = await reply
        return dict(reply)

    def close(self) -> None:
        pass


def _serve(respond: Any) -> tuple[Gateway, _FakeBackend]:
    backend = _FakeBackend(respond)
    gateway = Gateway(backend, port=0, access_log=False)
    gateway.start()
    return gateway, backend


def _request(url: str, **kwargs: Any) -> tuple[int, Any, bytes]:
    req = urllib.request.Request(url, **kwargs)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def test_http_front_round_trip_with_binary_response_and_multi_value_headers() -> None:
    def respond(event: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "result": {
                "statusCode": 201,
                "headers": {"Content-Type": "application/octet-stream"},
                # an ASGI server (uvicorn) hands header names lower-cased, unlike API Gateway:
                # handlers read them case-insensitively (Mangum and Starlette do)
                "multiValueHeaders": {"X-Seen": event["multiValueHeaders"]["x-tag"]},
                "body": base64.b64encode(PNG).decode(),
                "isBase64Encoded": True,
            },
        }

    gateway, backend = _serve(respond)
    try:
        status, headers, body = _request(
            f"{gateway.url}/jobs?a=1&a=2",
            data=b'{"x":1}',
            method="POST",
            headers={
                "Content-Type": "application/json",
                "X-Tag": "one",
                "x-forwarded-for": "198.51.100.9",
                "x-forwarded-proto": "https",
                "X-Forwarded-Port": "443",
            },
        )
        assert status == 201
        assert body == PNG
        assert headers.get_all("X-Seen") == ["one"]
        assert headers["x-amzn-RequestId"]
        event = backend.events[-1]
        assert event["body"] == '{"x":1}' and event["isBase64Encoded"] is False
        assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"]}
        # API Gateway's own X-Forwarded-* replace the client's; the client's address is appended
        forwarded = {k: v for k, v in event["headers"].items() if k.lower().startswith("x-forw")}
        assert forwarded == {
            "X-Forwarded-For": "198.51.100.9, 127.0.0.1",
            "X-Forwarded-Proto": "http",
            "X-Forwarded-Port": str(gateway.server_address[1]),
        }
        assert event["multiValueHeaders"]["X-Forwarded-Proto"] == ["http"]
        assert event["requestContext"]["identity"]["sourceIp"] == "127.0.0.1"
    finally:
        gateway.close()


def test_http_front_answers_502_on_function_error_and_504_on_timeout() -> None:
    def respond(event: dict[str, Any]) -> dict[str, Any]:
        if event["path"] == "/slow":
            raise TimeoutError
        if event["path"] == "/garbage":
            return {"ok": True, "result": {"nope": 1}}
        return {"ok": False, "error": "RuntimeError: boom"}

    gateway, _ = _serve(respond)
    try:
        assert _request(f"{gateway.url}/boom")[0] == 502
        assert _request(f"{gateway.url}/garbage")[0] == 502
        status, _, body = _request(f"{gateway.url}/slow")
        assert status == 504
        assert json.loads(body) == {"message": "Endpoint request timed out"}
    finally:
        gateway.close()


def test_http_front_serves_requests_concurrently_on_uvloop() -> None:
    import uvloop

    barrier = asyncio.Barrier(4)
    loops: list[asyncio.AbstractEventLoop] = []

    async def respond(event: dict[str, Any]) -> dict[str, Any]:
        loops.append(asyncio.get_running_loop())
        async with asyncio.timeout(5):
            await barrier.wait()  # only returns when 4 requests are in flight at once
        return {"ok": True, "result": {"statusCode": 204, "body": ""}}

    gateway, _ = _serve(respond)
    try:
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(_request(f"{gateway.url}/h")[0]))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert statuses == [204] * 4
        # the front's loop is uvloop's: it costs less CPU per request
        assert len(loops) == 4 and all(isinstance(loop, uvloop.Loop) for loop in loops)
    finally:
        gateway.close()


def test_lambda_context_counts_down_and_expires() -> None:
    ctx = LambdaContext("asyncz-local-worker", 900, request_id="r1")
    assert 899_000 < ctx.get_remaining_time_in_millis() <= 900_000
    assert ctx.aws_request_id == "r1"
    assert ctx.invoked_function_arn.endswith(":function:asyncz-local-worker")
    assert ctx.log_group_name == "/aws/lambda/asyncz-local-worker"
    time.sleep(0.01)
    assert ctx.get_remaining_time_in_millis() < 900_000
    ctx.expire()
    assert ctx.get_remaining_time_in_millis() == 0


class _FakeSandbox:
    """Stands in for a SandboxProcess: answers, or times out (and is then broken)."""

    def __init__(self, name: str, behaviour: str = "ok") -> None:
        self.name = name
        self.behaviour = behaviour
        self.broken = False
        self.stopped = False
        self.served = 0

    async def ainvoke(self, event: dict[str, Any], timeout_s: float, **_: Any) -> dict[str, Any]:
        self.served += 1
        if self.behaviour == "slow":
            await asyncio.sleep(0.05)
        if self.behaviour == "timeout":
            self.broken = True
            raise SandboxTimeoutError(f"{self.name} timed out")
        return {"ok": True, "result": {"statusCode": 200, "body": self.name}}

    def alive(self) -> bool:
        return not self.broken

    def unwatch(self) -> None:
        pass

    def stop(self, grace_s: float = 0) -> None:
        self.stopped = True


def test_pool_maps_a_sandbox_timeout_to_504_and_replaces_the_sandbox() -> None:
    fresh = _FakeSandbox("fresh")
    slow = _FakeSandbox("slow", "timeout")
    pool = SandboxPool([slow], respawn=lambda dead: fresh)
    gateway = Gateway(pool, port=0, access_log=False)
    gateway.start()
    try:
        assert _request(f"{gateway.url}/x")[0] == 504
        status, _, body = _request(f"{gateway.url}/x")
        assert (status, body) == (200, b"fresh")
        assert pool.size == 1
    finally:
        gateway.close()
        pool.close()
    assert fresh.stopped


def test_http_front_answers_expect_100_continue_before_the_body_arrives() -> None:
    def respond(event: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "result": {"statusCode": 202, "body": event["body"]}}

    gateway, _ = _serve(respond)
    host, port = gateway.server_address[:2]
    try:
        with socket.create_connection((str(host), int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 2\r\nExpect: 100-continue\r\n\r\n"
            )
            interim = sock.recv(1024)  # a buffered front would hold this until the end
            assert interim.startswith(b"HTTP/1.1 100"), interim
            sock.sendall(b"{}")
            final = b""
            while not final.endswith(b"{}"):
                chunk = sock.recv(1024)
                assert chunk, final
                final += chunk
            assert b" 202 " in final.split(b"\r\n", 1)[0]
    finally:
        gateway.close()


def _event(n: int = 0) -> dict[str, Any]:
    return {"requestContext": {"requestId": f"r{n}"}}


def test_pool_queues_requests_beyond_its_sandboxes_and_serves_them_all() -> None:
    sandboxes = [_FakeSandbox("a", "slow"), _FakeSandbox("b", "slow")]
    pool = SandboxPool(sandboxes, respawn=lambda dead: dead)

    async def burst() -> list[dict[str, Any]]:
        return await asyncio.gather(*(pool.invoke(_event(i), 5) for i in range(10)))

    replies = asyncio.run(burst())
    assert [r["ok"] for r in replies] == [True] * 10
    assert sorted(s.served for s in sandboxes) == [5, 5]  # both took turns, none served two at once


def test_pool_gives_up_when_no_sandbox_frees_in_time_and_keeps_the_sandbox() -> None:
    busy = _FakeSandbox("busy", "slow")
    pool = SandboxPool([busy], respawn=lambda dead: dead)

    async def crowd() -> list[Any]:
        first = asyncio.ensure_future(pool.invoke(_event(1), 5))
        await asyncio.sleep(0)  # the first takes the only sandbox
        late = await asyncio.gather(pool.invoke(_event(2), 0.01), return_exceptions=True)
        return [await first, *late, await pool.invoke(_event(3), 5)]

    first, late, after = asyncio.run(crowd())
    assert first["ok"] and after["ok"]
    assert isinstance(late, TimeoutError)
    assert pool.size == 1 and busy.served == 2  # the waiter that gave up took nothing


def test_pool_wakes_a_waiting_request_when_a_sandbox_joins_from_another_thread() -> None:
    pool = SandboxPool([], respawn=lambda dead: dead)
    joining = _FakeSandbox("late")

    async def wait_for_one() -> dict[str, Any]:
        waiting = asyncio.ensure_future(pool.invoke(_event(), 5))
        await asyncio.sleep(0.01)
        threading.Thread(target=pool.add, args=(joining,)).start()  # as sandboxes initialise
        return await waiting

    assert asyncio.run(wait_for_one())["result"]["body"] == "late"
    pool.close()
    assert joining.stopped


def test_pool_replaces_a_sandbox_that_died_while_idle_before_giving_it_work() -> None:
    died = _FakeSandbox("died")
    fresh = _FakeSandbox("fresh")
    pool = SandboxPool([died], respawn=lambda dead: fresh)
    died.broken = True  # what the loop records when the idle sandbox's pipe reaches EOF

    reply = asyncio.run(pool.invoke(_event(), 5))
    assert reply["result"]["body"] == "fresh"  # the request waited for the replacement
    assert died.served == 0 and pool.size == 1


def test_the_front_answers_without_waiting_on_delayed_acks() -> None:
    """A response's head and body must not wait on the client's delayed ACK (~40 ms): the
    front's connections run with TCP_NODELAY."""
    import socket as _socket

    from asyncz.local.apigateway.front import HttpServer

    server = HttpServer(lambda r: None, "127.0.0.1", 0, on_error=lambda e: None)  # type: ignore[arg-type, return-value]
    try:
        assert server.sock.getsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY)
    finally:
        server.close()


def test_the_http_api_event_joins_repeats_and_keeps_cookies_apart() -> None:
    event = build_http_event(
        "post", "/jobs/x%20y?a=1&a=2&b=", [("X-Tag", "one"), ("x-tag", "two"),
        ("Cookie", "s=1; t=2"), ("Content-Type", "application/octet-stream")], b"\xff\x00",
        request_id="r-1", now=0.0,
    )  # fmt: skip
    assert (event["version"], event["routeKey"], event["rawPath"]) == (
        "2.0",
        "$default",
        "/jobs/x y",
    )
    assert event["headers"]["x-tag"] == "one,two" and "cookie" not in event["headers"]
    assert event["cookies"] == ["s=1", "t=2"]
    assert event["rawQueryString"] == "a=1&a=2&b="
    assert event["queryStringParameters"] == {"a": "1,2", "b": ""}
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]) == b"\xff\x00"


def test_a_payload_2_response_sets_its_cookies() -> None:
    status, headers, body = parse_result(
        {"statusCode": 201, "headers": {"content-type": "text/plain"}, "cookies": ["a=1", "b=2"],
         "body": "ok"}
    )  # fmt: skip
    assert status == 201 and body == b"ok"
    assert [v for k, v in headers if k == "Set-Cookie"] == ["a=1", "b=2"]
