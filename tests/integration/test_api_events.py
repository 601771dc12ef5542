"""The api Lambda against real servers: ``POST /jobs`` and ``POST /jobs/batch`` answered the
same for API Gateway REST API (v1) and HTTP API (2.0) events, bodies Mangum cannot decode
refused as the client's error, and the pool under the api surviving a connection the server
dropped while the sandbox was idle (frozen between invocations).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import redis

from asyncz.api import handler as api_handler
from asyncz.broker.keys import ready_score
from asyncz.connections import hash_api_key
from asyncz.errors import StoreUnavailableError
from asyncz.jobs import NewJob
from asyncz.observability import logger
from asyncz.port_types import epoch_ms
from asyncz.settings import Settings
from asyncz.store import runner
from asyncz.store.postgres import PostgresStore
from tests.support.apigw import EVENTS, FakeContext, drop_sandbox, http_api_event, rest_event
from tests.support.databases import empty_servers
from tests.support.ledger import rows
from tests.support.settings import make_settings

pytestmark = pytest.mark.integration

KEY = "events-key-" + "k" * 24
JSON = {"Content-Type": "application/json"}
SOON = (datetime.now(UTC) + timedelta(days=40)).date().isoformat()


@pytest.fixture
def settings(pg_url: str, redis_server_url: str, clean: None) -> Settings:
    return make_settings(
        pg_url,
        redis_server_url,
        api_key_hashes=hash_api_key(KEY),
        max_payload_bytes=8 * 1024,
        wake_worker=False,
        queues="default,later,at",
    )


def count_jobs(settings: Settings) -> int:
    return int(rows(settings.database_url or "", "SELECT count(*) AS n FROM jobs")[0]["n"])


# Every kind of POST /jobs request: (name, event keyword arguments).
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("ok", {"body": {"task": "echo", "payload": {"a": 1}}}),
    ("seed shape", {"body": {"payload": {"task": "email_send", "user_id": 42}}}),
    ("no key", {"body": {"task": "echo"}, "api_key": None}),
    ("wrong key", {"body": {"task": "echo"}, "api_key": "nope"}),
    ("unknown task", {"body": {"task": "no_such_task"}}),
    ("missing task", {"body": {"payload": {}}}),
    ("extra field", {"body": {"task": "echo", "surprise": 1}}),
    ("out of range", {"body": {"task": "echo", "max_retries": 99, "priority": 1000}}),
    ("both schedules", {"body": {"task": "echo", "delay_seconds": 1, "run_at": SOON}}),
    ("naive run_at", {"body": {"task": "echo", "run_at": f"{SOON}T00:00:00"}}),
    ("payload not object", {"body": {"task": "echo", "payload": [1]}}),
    ("nul in payload", {"body": {"task": "echo", "payload": {"a": "x\u0000y"}}}),
    ("nul in payload key", {"body": {"task": "echo", "payload": {"x\u0000": 1}}}),
    ("nan in payload", {"raw_body": b'{"task": "echo", "payload": {"a": NaN}}', "headers": JSON}),
    ("infinity", {"raw_body": b'{"task": "echo", "payload": {"a": [-Infinity]}}', "headers": JSON}),
    ("undeclared queue", {"body": {"task": "echo", "queue": "emails"}}),
    ("run_at too late", {"body": {"task": "echo", "run_at": "2999-01-01T00:00:00Z"}}),
    ("nul in key", {"body": {"task": "echo", "idempotency_key": "a\u0000b"}}),
    ("nul in queue", {"body": {"task": "echo", "queue": "q\u0000"}}),
    ("run_at", {"body": {"task": "echo", "run_at": f"{SOON}T00:00:00+02:00", "priority": -3}}),
    ("sql-looking", {"body": {"task": "echo", "queue": "q'; DROP TABLE jobs;--"}}),
    ("too large", {"body": {"task": "echo", "payload": {"x": "y" * 9000}}}),
    ("not json", {"raw_body": b"task=echo", "headers": {"Content-Type": "text/plain"}}),
    ("no content type", {"raw_body": b'{"task": "echo"}', "headers": {}}),
    ("broken json", {"raw_body": b'{"task": ', "headers": JSON}),
    ("empty body", {"raw_body": b"", "headers": JSON}),
    ("json array", {"raw_body": b"[1, 2]", "headers": JSON}),
    ("invalid utf-8", {"raw_body": b'{"task": "echo", "payload": {"a": "\xff"}}', "headers": JSON}),
    ("too deep", {"raw_body": b'{"payload":' + b"[" * 80 + b"]" * 80 + b"}", "headers": JSON}),
    ("long header key", {"body": {"task": "echo"}, "headers": {"Idempotency-Key": "k" * 201}}),
    ("header key", {"body": {"task": "echo"}, "headers": {"Idempotency-Key": "h-1"}}),
    ("json+ media", {"raw_body": b'{"task": "echo"}', "headers": {"Content-Type": "x/y+json"}}),
]
TAKEN = "taken-key"  # submitted before every request below: the duplicate cases reuse it
DUPLICATES: list[tuple[str, dict[str, Any]]] = [
    ("duplicate key", {"body": {"task": "echo", "idempotency_key": TAKEN}}),
    ("duplicate header key", {"body": {"task": "echo"}, "headers": {"Idempotency-Key": TAKEN}}),
]


def batch(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"body": {"jobs": list(jobs)}}


ECHO = {"task": "echo", "payload": {"i": 1}}
# Every kind of POST /jobs/batch request.
BATCHES: list[tuple[str, dict[str, Any]]] = [
    ("ok", batch(ECHO, {"task": "echo", "delay_seconds": 60}, {"task": "echo", "priority": 3})),
    ("seed shape", batch({"payload": {"task": "email_send", "user_id": 42}})),
    ("no key", {**batch(ECHO), "api_key": None}),
    ("wrong key", {**batch(ECHO), "api_key": "nope"}),
    ("unknown task at 2", batch(ECHO, ECHO, {"task": "no_such_task"})),
    ("missing task at 1", batch(ECHO, {"payload": {}})),
    ("out of range at 0", batch({"task": "echo", "priority": 1000}, ECHO)),
    ("nul in payload at 1", batch(ECHO, {"task": "echo", "payload": {"a": "x\u0000"}})),
    ("undeclared queue", batch({"task": "echo", "queue": "emails"})),
    ("no jobs", batch()),
    ("jobs not a list", {"body": {"jobs": {"task": "echo"}}}),
    ("no jobs field", {"body": {"job": [ECHO]}}),
    ("a bare job", {"body": ECHO}),
    ("too many", batch(*[{"task": "e"}] * 501)),
    ("too large", batch(ECHO, {"task": "echo", "payload": {"x": "y" * 9000}})),
    ("not json", {"raw_body": b"jobs=1", "headers": {"Content-Type": "text/plain"}}),
    ("broken json", {"raw_body": b'{"jobs": [', "headers": JSON}),
    ("empty body", {"raw_body": b"", "headers": JSON}),
    ("invalid utf-8", {"raw_body": b'{"jobs": [{"task": "\xff"}]}', "headers": JSON}),
    (
        "too deep",
        {"raw_body": b'{"jobs": [{"payload":' + b"[" * 80 + b"]" * 80 + b"}]}", "headers": JSON},
    ),
    ("header key ignored", {**batch(ECHO, ECHO), "headers": {"Idempotency-Key": "h-1"}}),
    (
        "keys repeated within",
        batch({"task": "echo", "idempotency_key": "a"}, {"task": "echo", "idempotency_key": "a"}),
    ),
    ("a key taken", batch(ECHO, {"task": "echo", "idempotency_key": TAKEN})),
]


def shape(reply: dict[str, Any]) -> tuple[Any, ...]:
    """What must be equal between the event shapes (ids and timestamps differ)."""
    body = json.loads(reply["body"]) if reply["body"] else None
    headers = {k.lower() for k in reply["headers"]} & {"location", "content-type"}
    if isinstance(body, dict) and "job_id" in body:
        body = {**body, "job_id": "<id>"}
        if "message" in body:  # a duplicate names the job it found
            body["message"] = body["message"].replace(json.loads(reply["body"])["job_id"], "<id>")
    if isinstance(body, dict) and isinstance(body.get("jobs"), list):
        body = {**body, "jobs": [{**item, "job_id": "<id>"} for item in body["jobs"]]}
    if isinstance(body, dict) and "details" in body:
        body = {**body, "details": [(d["field"], d["type"]) for d in body["details"]]}
    return reply["statusCode"], body, sorted(headers)


CASES = [
    *(pytest.param("/jobs", kw, id=f"jobs {name}") for name, kw in REQUESTS + DUPLICATES),
    *(pytest.param("/jobs/batch", kw, id=f"batch {name}") for name, kw in BATCHES),
]


@pytest.mark.parametrize(("path", "kwargs"), CASES)
def test_rest_and_http_api_events_get_the_same_answer(
    settings: Settings, path: str, kwargs: dict[str, Any]
) -> None:
    """Same body, same headers: same status, body, error code and kept jobs, whichever
    flavour of API Gateway sent the event."""
    sandbox = api_handler.build_sandbox(settings)
    taken = {"task": "echo", "idempotency_key": TAKEN}
    replies, added = {}, {}
    for flavour, event in EVENTS.items():
        empty_servers(settings.database_url or "", settings.redis_url or "")
        seeded = sandbox(event("POST", "/jobs", body=taken, api_key=KEY), FakeContext())
        assert seeded["statusCode"] == 202, seeded
        replies[flavour] = sandbox(event("POST", path, **{"api_key": KEY, **kwargs}), FakeContext())
        added[flavour] = count_jobs(settings) - 1
    assert shape(replies["rest"]) == shape(replies["http"]), replies
    assert added["rest"] == added["http"]
    reply = json.loads(replies["rest"]["body"])
    if replies["rest"]["statusCode"] != 202:
        assert added["rest"] == 0  # nothing half-kept
        assert isinstance(reply.get("error"), str) and reply.get("message"), reply
    else:
        expected = reply.get("accepted", 1)
        assert added["rest"] == expected


def test_the_same_key_from_either_event_shape_is_one_job(settings: Settings) -> None:
    sandbox = api_handler.build_sandbox(settings)
    body = {"task": "echo", "payload": {}, "idempotency_key": str(uuid.uuid4())}
    first = sandbox(rest_event("POST", "/jobs", body=body, api_key=KEY), FakeContext())
    again = sandbox(http_api_event("POST", "/jobs", body=body, api_key=KEY), FakeContext())
    third = sandbox(rest_event("POST", "/jobs", body=body, api_key=KEY), FakeContext())
    job_id = json.loads(first["body"])["job_id"]
    for dup in (again, third):
        assert dup["statusCode"] == 409
        assert json.loads(dup["body"]) | {"message": ""} == {
            "error": "duplicate_idempotency_key",
            "message": "",
            "job_id": job_id,
            "status": "queued",
        }


def test_a_non_ascii_idempotency_key_header_is_kept_as_sent(settings: Settings) -> None:
    """API Gateway hands header values as text; the key stored is that text (not its UTF-8
    bytes read as ISO-8859-1, as ASGI hands header bytes to the app)."""
    sandbox = api_handler.build_sandbox(settings)
    for flavour, event in EVENTS.items():
        key = f"clé-{flavour}-\u00fc\u4e2d"
        headers = {"Idempotency-Key": key}
        reply = sandbox(event("POST", "/jobs", body={"task": "echo"}, headers=headers,
                              api_key=KEY), FakeContext())  # fmt: skip
        assert reply["statusCode"] == 202, reply
        job_id = json.loads(reply["body"])["job_id"]
        stored = rows(settings.database_url or "", "SELECT idempotency_key FROM jobs WHERE id=%s",
                      (job_id,))  # fmt: skip
        assert stored[0]["idempotency_key"] == key


@pytest.mark.parametrize("flavour", sorted(EVENTS))
def test_a_base64_body_with_invalid_padding_is_a_4xx(settings: Settings, flavour: str) -> None:
    sandbox = api_handler.build_sandbox(settings)
    for path in ("/jobs", "/jobs/batch", "/dlq/replay"):
        event = EVENTS[flavour]("POST", path, body={"task": "echo"}, api_key=KEY)
        event["body"], event["isBase64Encoded"] = "abc", True
        reply = sandbox(event, FakeContext())
        assert reply["statusCode"] == 422, (path, reply)
        assert json.loads(reply["body"])["error"] == "invalid_body"
    event = EVENTS[flavour]("POST", "/jobs", body={"task": "echo"}, api_key=KEY)
    event["body"] = base64.b64encode(b'{"task": "echo"}').decode()
    event["isBase64Encoded"] = True
    assert sandbox(event, FakeContext())["statusCode"] == 202


@pytest.mark.parametrize("flavour", sorted(EVENTS))
def test_a_body_that_cannot_be_decoded_without_a_key_is_unauthorized(
    settings: Settings, flavour: str
) -> None:
    """The key is checked first, as for every other refused body."""
    sandbox = api_handler.build_sandbox(settings)
    for body, is_base64 in (("abc", True), ('{"task": "\ud800"}', False)):
        for api_key in (None, "nope"):
            event = EVENTS[flavour]("POST", "/jobs", body={"task": "echo"}, api_key=api_key)
            event["body"], event["isBase64Encoded"] = body, is_base64
            reply = sandbox(event, FakeContext())
            assert reply["statusCode"] == 401, reply
            assert json.loads(reply["body"])["error"] == "unauthorized"


@pytest.mark.parametrize("flavour", sorted(EVENTS))
def test_a_text_body_with_lone_surrogates_is_invalid_utf8_not_a_crash(
    settings: Settings, flavour: str
) -> None:
    """API Gateway hands a text body as a string; one with lone surrogates has no UTF-8 form."""
    sandbox = api_handler.build_sandbox(settings)
    for path in ("/jobs", "/jobs/batch", "/dlq/replay"):
        event = EVENTS[flavour]("POST", path, body={"task": "echo"}, api_key=KEY)
        event["body"] = '{"task": "echo", "payload": {"a": "\ud800"}}'
        reply = sandbox(event, FakeContext())
        assert reply["statusCode"] == 422, (path, reply)
        assert json.loads(reply["body"])["error"] == "invalid_utf8"
    assert count_jobs(settings) == 0


@pytest.mark.parametrize("flavour", sorted(EVENTS))
def test_invocations_carry_the_api_gateway_request_id(settings: Settings, flavour: str) -> None:
    api_handler._sandbox = api_handler.build_sandbox(settings)
    try:
        event = EVENTS[flavour]("POST", "/jobs", body={"task": "echo"}, api_key=KEY)
        assert api_handler.handler(event, FakeContext())["statusCode"] == 202
        assert logger.get_correlation_id() == event["requestContext"]["requestId"]
        event = EVENTS[flavour]("GET", "/stats", api_key=KEY)
        assert api_handler.handler(event, FakeContext())["statusCode"] == 200
        assert logger.get_correlation_id() == event["requestContext"]["requestId"]
    finally:
        api_handler.reset()


def test_the_api_sandbox_runs_on_asyncios_own_loop(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An api sandbox's first invocation makes its loop asyncio's (uvloop's per-run signal
    set-up costs more than it saves on one request's few awaits); every route shares it."""
    import uvloop

    from asyncz import eventloop

    monkeypatch.setattr(eventloop, "_loop", None)  # a fresh sandbox
    api_handler._sandbox = api_handler.build_sandbox(settings)
    try:
        event = rest_event("POST", "/jobs", body={"task": "echo"}, api_key=KEY)
        assert api_handler.handler(event, FakeContext())["statusCode"] == 202
        loop = eventloop._loop
        assert loop is not None and not isinstance(loop, uvloop.Loop)
        event = rest_event("GET", "/stats", api_key=KEY)
        assert api_handler.handler(event, FakeContext())["statusCode"] == 200
        assert eventloop._loop is loop
    finally:
        drop_sandbox()
        if eventloop._loop is not None:
            eventloop._loop.close()


def test_building_a_sandbox_leaves_its_own_loop_current(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mangum looks for a current loop when it is built; it must find the sandbox's, not make
    one of its own that no invocation runs on (and that is never closed)."""
    from asyncz import eventloop

    before = eventloop._loop  # the loop earlier tests left current (restored afterwards)
    monkeypatch.setattr(eventloop, "_loop", None)  # a fresh sandbox
    asyncio.set_event_loop(None)  # nothing current: Mangum would make a loop
    try:
        api_handler.build_sandbox(settings)
        assert eventloop._loop is not None
        assert asyncio.get_event_loop() is eventloop._loop
    finally:
        if eventloop._loop is not None:
            eventloop._loop.close()
        asyncio.set_event_loop(before if before is not None and not before.is_closed() else None)


# --- the store under the api ----------------------------------------------------------------------


def _terminate(pg_url: str, application_name: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        return len(
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (application_name,),
            ).fetchall()
        )


@pytest.fixture
def named_url(pg_url: str) -> Iterator[tuple[str, str]]:
    name = f"api-{uuid.uuid4().hex[:8]}"
    yield psycopg.conninfo.make_conninfo(pg_url, application_name=name), name


DEFAULTS: dict[str, Any] = {"max_retries": 1, "timeout_seconds": 30}


async def _insert_with(store: PostgresStore) -> Any:
    return await store.insert_job(str(uuid.uuid4()), NewJob(task="echo", payload={}, **DEFAULTS))


def test_a_connection_dropped_while_idle_is_replaced_before_the_insert(
    named_url: tuple[str, str], clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "IDLE_CHECK_SECONDS", 0.0)  # every use counts as idle

    async def scenario() -> None:
        url, name = named_url
        store = PostgresStore.create(url, min_size=1, max_size=1)
        await store.open()
        try:
            assert await _insert_with(store) is not None
            assert _terminate(url, name) == 1  # e.g. a failover while the sandbox was frozen
            assert await _insert_with(store) is not None  # checked, found dead, replaced
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_connection_dropped_mid_use_fails_once_then_reconnects(
    named_url: tuple[str, str], clean: None
) -> None:
    async def scenario() -> None:
        url, name = named_url
        store = PostgresStore.create(url, min_size=1, max_size=1)
        await store.open()
        try:
            assert await _insert_with(store) is not None
            assert _terminate(url, name) == 1
            with pytest.raises(StoreUnavailableError, match="database unavailable"):
                await _insert_with(store)
            for _ in range(50):  # the pool reconnects in the background
                try:
                    assert await _insert_with(store) is not None
                    return
                except StoreUnavailableError:
                    await asyncio.sleep(0.1)
            raise AssertionError("the pool never reconnected")
        finally:
            await store.close()

    asyncio.run(scenario())


def test_submit_enqueues_due_and_delayed_jobs_where_and_when_postgres_says(
    settings: Settings,
) -> None:
    sandbox = api_handler.build_sandbox(settings)
    submitted = {}
    for name, body in (
        ("due", {"task": "echo", "priority": 7}),
        ("delayed", {"task": "echo", "queue": "later", "delay_seconds": 300}),
        ("at", {"task": "echo", "queue": "at", "run_at": f"{SOON}T00:00:00+02:00"}),
    ):
        reply = sandbox(rest_event("POST", "/jobs", body=body, api_key=KEY), FakeContext())
        assert reply["statusCode"] == 202, reply
        submitted[name] = json.loads(reply["body"])["job_id"]
    run_at = {
        str(r["id"]): epoch_ms(r["run_at"])
        for r in rows(settings.database_url or "", "SELECT id, run_at FROM jobs")
    }
    r = redis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    prefix = settings.redis_prefix
    due = submitted["due"]
    assert r.zrange(f"{prefix}:{{default}}:ready", 0, -1, withscores=True) == [
        (due, float(ready_score(7, run_at[due])))
    ]
    later = submitted["delayed"]
    assert r.zrange(f"{prefix}:{{later}}:delayed", 0, -1, withscores=True) == [
        (f"0|{later}", float(run_at[later]))
    ]
    assert r.zcard(f"{prefix}:{{later}}:ready") == 0
    at = submitted["at"]
    expected = datetime.fromisoformat(f"{SOON}T00:00:00+02:00")
    assert run_at[at] == epoch_ms(expected)
    assert r.zrange(f"{prefix}:{{at}}:delayed", 0, -1, withscores=True) == [
        (f"0|{at}", float(run_at[at]))
    ]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_redis_down_at_the_first_submit_still_accepts_the_job(settings: Settings) -> None:
    # An unreachable Redis at the first submit is "enqueue deferred to recovery", not a 500.
    down = settings.model_copy(
        update={
            "redis_url": f"redis://127.0.0.1:{_closed_port()}/0",
            "redis_socket_timeout_seconds": 0.5,
        }
    )
    sandbox = api_handler.build_sandbox(down)
    for _ in range(2):  # and the next submit tries again, still without an error
        reply = sandbox(
            rest_event("POST", "/jobs", body={"task": "echo"}, api_key=KEY), FakeContext()
        )
        assert reply["statusCode"] == 202, reply
    queued = rows(settings.database_url or "", "SELECT status FROM jobs")
    assert [r["status"] for r in queued] == ["queued", "queued"]
