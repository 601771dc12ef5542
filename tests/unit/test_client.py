"""asyncz.client without a server: errors per code, retries with backoff and an automatic
idempotency key, batching, pagination, replay_all, wait/result (httpx MockTransport)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from asyncz.client import (
    AsyncClient,
    Client,
    ConnectionFailed,
    DuplicateJob,
    InvalidInput,
    InvalidState,
    JobFailed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    Unavailable,
    WaitTimeout,
    _core,
)

pytestmark = pytest.mark.unit

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def asleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("asyncz.client.sync.time.sleep", slept.append)
    monkeypatch.setattr("asyncz.client.aio.asyncio.sleep", asleep)
    return slept


def client(handler: Handler, **kw: Any) -> Client:
    return Client("http://api.test", "k", transport=httpx.MockTransport(handler), **kw)


def reply(status: int, body: Any = None, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def test_importing_the_client_imports_no_server_dependency() -> None:
    code = (
        "import sys, asyncz.client\n"
        "heavy = ['fastapi', 'starlette', 'psycopg', 'psycopg_pool', 'redis', 'boto3', "
        "'botocore', 'aws_lambda_powertools', 'pydantic', 'mangum']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (401, {"error": "unauthorized", "message": "no"}, Unauthorized),
        (403, {"message": "Forbidden"}, Unauthorized),  # API Gateway's own shape
        (404, {"error": "job_not_found", "message": "no job"}, NotFound),
        (409, {"error": "invalid_state", "message": "x", "status": "completed"}, InvalidState),
        (409, {"error": "duplicate_idempotency_key", "message": "x", "job_id": "j1"}, DuplicateJob),
        (422, {"error": "unknown_task", "message": "jobs[3]: x", "index": 3}, InvalidInput),
    ],
)
def test_each_error_code_is_its_exception(status: int, body: Any, cls: type) -> None:
    with client(lambda r: reply(status, body), retries=0) as c, pytest.raises(cls) as info:
        c.get("j")
    assert info.value.status == status
    if cls is DuplicateJob:
        assert info.value.job_id == "j1"
    if cls is InvalidInput:
        assert info.value.index == 3 and info.value.code == "unknown_task"
    if cls is InvalidState:
        assert info.value.job_status == "completed"


def test_reads_retry_on_503_and_connection_errors_with_growing_jittered_backoff(
    no_sleep: list[float],
) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("refused")
        if len(calls) < 4:
            return reply(503, {"error": "database_unavailable", "message": "down"})
        return reply(200, {"job_id": "j", "status": "queued"})

    with client(handler, retries=3) as c:
        assert c.get("j").status == "queued"
    assert len(calls) == 4 and len(no_sleep) == 3
    assert all(0 <= s <= _core.RetryPolicy().base * 2**i for i, s in enumerate(no_sleep))


def test_retries_run_out_into_the_errors() -> None:
    down = client(lambda r: reply(503, {"error": "x", "message": "m"}), retries=2)
    with down as c, pytest.raises(Unavailable):
        c.get("j")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with client(refuse, retries=1) as c, pytest.raises(ConnectionFailed):
        c.stats()


def test_429_waits_at_least_retry_after_then_raises_rate_limited(no_sleep: list[float]) -> None:
    slow = client(lambda r: reply(429, {"message": "slow"}, **{"Retry-After": "2"}), retries=1)
    with slow as c, pytest.raises(RateLimited) as info:
        c.get("j")
    assert info.value.retry_after == 2.0 and no_sleep == [2.0]


def test_a_retried_submit_carries_one_generated_key_and_never_makes_two_jobs() -> None:
    keys = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        keys.append(body["idempotency_key"])
        if len(keys) == 1:
            raise httpx.ReadTimeout("stored, but the answer was lost")
        return reply(409, {"error": "duplicate_idempotency_key", "message": "x",
                           "job_id": "first", "status": "queued"})  # fmt: skip

    with client(handler) as c:
        job = c.submit("echo", {"a": 1}, queue="default", max_retries=0)
    assert job.id == "first" and job.task == "echo" and not job.duplicate
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("asyncz-client-")


def test_a_callers_duplicate_key_raises_and_no_retries_means_no_key() -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return reply(409, {"error": "duplicate_idempotency_key", "message": "x", "job_id": "j0"})

    with client(handler) as c, pytest.raises(DuplicateJob) as info:
        c.submit("echo", idempotency_key="mine")
    assert info.value.job_id == "j0" and seen[0]["idempotency_key"] == "mine"
    with client(lambda r: (seen.append(json.loads(r.content)), reply(202, {
            "job_id": "j1", "status": "queued"}))[1], retries=0) as c:  # fmt: skip
        assert c.submit("echo").id == "j1"
    assert "idempotency_key" not in seen[-1]


def test_a_callers_own_key_is_retried_and_its_own_stored_try_is_returned() -> None:
    answers = iter([
        httpx.ReadTimeout("stored, but the answer was lost"),
        reply(503, {"error": "outcome_unknown", "message": "may have been stored"}),
        reply(409, {"error": "duplicate_idempotency_key", "message": "x", "job_id": "first",
                    "status": "queued"}),
    ])  # fmt: skip
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["idempotency_key"])
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with client(handler) as c:
        job = c.submit("echo", idempotency_key="mine")
    assert job.id == "first" and job.idempotency_key == "mine"
    assert seen == ["mine"] * 3


def test_an_unknown_outcome_is_not_resent_when_a_second_try_is_unsafe() -> None:
    """A bulk replay is not idempotent (each try replays what is dead now): a 503 that says
    the first try may have run is raised, not sent again; a plain 503 (nothing ran) is."""
    calls = []
    answers = iter([
        reply(503, {"error": "database_unavailable", "message": "try again"}),
        reply(503, {"error": "outcome_unknown", "message": "the bulk replay may have been done"}),
    ])  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return next(answers)

    with client(handler) as c, pytest.raises(Unavailable) as info:
        c.replay_all(task="report")
    assert calls == ["/dlq/replay", "/dlq/replay"] and info.value.code == "outcome_unknown"


def test_a_query_the_database_gave_up_on_is_not_resent() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return reply(504, {"error": "query_timeout", "message": "narrow the filter"})

    with client(handler) as c, pytest.raises(Unavailable) as info:
        list(c.jobs(task="echo"))
    assert calls == ["/jobs"] and info.value.code == "query_timeout"


@pytest.mark.parametrize(
    ("action", "path", "second"),
    [
        ("cancel", "/jobs/j/cancel", reply(409, {"error": "invalid_state", "message": "x",
                                                 "status": "cancelled"})),
        ("replay", "/dlq/j/replay", reply(409, {"error": "invalid_state", "message": "x",
                                                "status": "queued"})),
        ("purge", "/dlq/j", reply(404, {"error": "job_not_found", "message": "x"})),
    ],
)  # fmt: skip
def test_an_operator_action_retried_after_a_lost_answer_finds_it_done(
    action: str, path: str, second: httpx.Response
) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) == 1:
            raise httpx.ReadTimeout("done, but the answer was lost")
        return second

    with client(handler) as c:
        getattr(c, action)("j")  # no exception: the first try did it
    assert calls == [path, path]
    with client(lambda r: second) as c, pytest.raises((InvalidState, NotFound)):
        getattr(c, action)("j")  # refused at the first try: someone else's state


def batch_handler(sizes: list[int]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        jobs = json.loads(request.content)["jobs"]
        sizes.append(len(jobs))
        return reply(202, {"jobs": [
            {"job_id": f"id-{j['payload']['i']}", "status": "queued",
             "duplicate": j.get("idempotency_key") == "taken"} for j in jobs
        ], "accepted": len(jobs), "duplicates": 0})  # fmt: skip

    return handler


def test_submit_many_splits_by_count_and_size_and_keeps_order() -> None:
    sizes: list[int] = []
    items = [{"task": "echo", "payload": {"i": i}} for i in range(1203)]
    items[5]["idempotency_key"] = "taken"
    done: list[int] = []
    with client(batch_handler(sizes)) as c:
        jobs = c.submit_many(items, progress=done.append)
    assert sizes == [500, 500, 203] and done == sizes
    assert [j.id for j in jobs] == [f"id-{i}" for i in range(1203)]
    assert jobs[5].duplicate and not jobs[6].duplicate
    big = [{"task": "echo", "payload": {"i": i, "pad": "x" * 100_000}} for i in range(5)]
    sizes.clear()
    with client(batch_handler(sizes)) as c:
        assert len(c.submit_many(big)) == 5
    assert sizes == [2, 2, 1]  # the body stays under the API's limit


def test_listings_follow_every_page() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        n = int(cursor or 0)
        items = [{"job_id": f"j{n + i}", "status": "dead"} for i in range(2)]
        return reply(200, {"items": items, "next_cursor": str(n + 2) if n < 4 else None})

    with client(handler) as c:
        assert [j.id for j in c.dead(queue="q", page_size=2)] == [f"j{i}" for i in range(6)]


def test_replay_all_pages_until_the_filter_is_empty_and_never_loops() -> None:
    left = [f"d{i}" for i in range(2500)]

    def handler(request: httpx.Request) -> httpx.Response:
        limit = json.loads(request.content)["limit"]
        page = left[:limit]
        del left[:limit]
        return reply(200, {"replayed": len(page), "job_ids": page})

    with client(handler) as c:
        assert len(c.replay_all(task="fail")) == 2500

    again = [f"x{i}" for i in range(1000)]  # the same jobs died again meanwhile
    with client(lambda r: reply(200, {"replayed": 1000, "job_ids": again})) as c:
        assert len(c.replay_all()) == 1000


def test_wait_and_result() -> None:
    states = iter(["queued", "processing", "completed"])

    def handler(request: httpx.Request) -> httpx.Response:
        return reply(200, {"job_id": "j", "status": next(states), "result": {"ok": 1}})

    with client(handler) as c:
        assert c.result("j", timeout=30) == {"ok": 1}
    dead = {"job_id": "j", "status": "dead", "last_error": "RuntimeError: boom"}
    with client(lambda r: reply(200, dead)) as c, pytest.raises(JobFailed) as info:
        c.result("j")
    assert info.value.error == "RuntimeError: boom"
    queued = client(lambda r: reply(200, {"job_id": "j", "status": "queued"}))
    with queued as c, pytest.raises(WaitTimeout) as timeout:
        c.wait("j", timeout=0)
    assert timeout.value.job.status == "queued"


def test_health_reports_degraded_instead_of_raising() -> None:
    degraded = {"status": "degraded", "dependencies": {"redis": "down"}}
    with client(lambda r: reply(503, degraded), retries=0) as c:
        health = c.health()
    assert not health.ok and health.dependencies == {"redis": "down"}


def test_submit_many_derives_each_key_from_one_call_key() -> None:
    keys: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        jobs = json.loads(request.content)["jobs"]
        keys.append([j["idempotency_key"] for j in jobs])
        return reply(202, {"jobs": [{"job_id": j["idempotency_key"], "status": "queued",
                                     "duplicate": len(keys) > 2} for j in jobs],
                           "accepted": len(jobs), "duplicates": 0})  # fmt: skip

    items = [{"task": "echo", "payload": {"i": i}} for i in range(700)]
    with client(handler) as c:
        first = c.submit_many(items, call_key="nightly-2026-12-04")
        again = c.submit_many(items, call_key="nightly-2026-12-04")
        other = c.submit_many(items[:2])
    assert keys[0] + keys[1] == [f"nightly-2026-12-04:{i}" for i in range(700)]
    assert keys[2] + keys[3] == keys[0] + keys[1]  # the same call: the same keys
    assert [j.id for j in again] == [j.id for j in first]
    assert all(j.duplicate for j in again)  # the caller resumed: it sees what existed
    assert keys[4][0].startswith("asyncz-call-") and keys[4][0].endswith(":0")
    assert not any(j.duplicate for j in other)


def test_a_submit_many_failure_carries_the_jobs_accepted_so_far() -> None:
    """The error is the API's own (InvalidInput here), with the jobs accepted before it,
    the call key, and the index of the bad item in the whole call."""
    batches = []

    def handler(request: httpx.Request) -> httpx.Response:
        jobs = json.loads(request.content)["jobs"]
        batches.append(len(jobs))
        if len(batches) == 2:
            return reply(422, {"error": "invalid_payload", "message": "jobs[3]: bad",
                               "index": 3})  # fmt: skip
        return reply(202, {"jobs": [{"job_id": f"id-{j['payload']['i']}", "status": "queued",
                                     "duplicate": False} for j in jobs],
                           "accepted": len(jobs), "duplicates": 0})  # fmt: skip

    items = [{"task": "echo", "payload": {"i": i}} for i in range(1200)]
    with client(handler) as c, pytest.raises(InvalidInput) as info:
        c.submit_many(items, call_key="k")
    err = info.value
    assert [j.id for j in err.submitted or []] == [f"id-{i}" for i in range(500)]
    assert err.call_key == "k" and err.index == 503 and batches == [500, 500]


def test_submit_many_learns_the_servers_body_limit_from_a_413() -> None:
    sizes: list[int] = []
    limit = 20_000

    def handler(request: httpx.Request) -> httpx.Response:
        if len(request.content) > limit:
            return reply(413, {"error": "payload_too_large", "message": "x", "max_bytes": limit})
        return batch_handler(sizes)(request)

    items = [{"task": "echo", "payload": {"i": i, "pad": "x" * 900}} for i in range(60)]
    with client(handler) as c:
        jobs = c.submit_many(items)
        assert [j.id for j in jobs] == [f"id-{i}" for i in range(60)]
        assert c._batch_bytes <= limit
        sizes.clear()
        c.submit_many(items)  # the next call starts with what the first learned
    assert sizes and max(sizes) * 950 < limit and len(sizes) == 4
    alone = [{"task": "echo", "payload": {"pad": "x" * 30_000}}]
    with client(handler) as c, pytest.raises(PayloadTooLarge) as info:
        c.submit_many(alone)
    assert info.value.submitted == [] and info.value.status == 413


def test_the_async_client_has_the_same_behaviour() -> None:
    sizes: list[int] = []

    async def go() -> None:
        transport = httpx.MockTransport(batch_handler(sizes))
        async with AsyncClient("http://api.test", "k", transport=transport) as c:
            jobs = await c.submit_many([{"task": "echo", "payload": {"i": i}} for i in range(700)])
            assert [j.id for j in jobs][-1] == "id-699"
        states = iter(["queued", "dead"])
        transport = httpx.MockTransport(
            lambda r: reply(200, {"job_id": "j", "status": next(states), "last_error": "E"})
        )
        async with AsyncClient("http://api.test", "k", transport=transport) as c:
            with pytest.raises(JobFailed):
                await c.result("j", timeout=10)
        page = {"items": [{"job_id": "a", "status": "queued"}], "next_cursor": None}
        pages = httpx.MockTransport(lambda r: reply(200, page))
        async with AsyncClient("http://api.test", "k", transport=pages) as c:
            assert [j.id async for j in c.jobs(status="queued")] == ["a"]

    asyncio.run(go())
    assert sizes == [500, 200]


def test_the_base_install_is_the_client_and_the_cli_alone() -> None:
    """``pip install asyncz-serverless`` (or ``[client]``) brings httpx, rich for the CLI's
    output, and nothing of the server; the server's stack is the ``server`` extra, which
    ``local`` and ``infra`` pull (tests/integration/test_cli_base_install.py installs it)."""
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
        "project"
    ]
    names = [dep.split("[")[0].split(">")[0].split("=")[0] for dep in project["dependencies"]]
    assert names == ["httpx", "rich"]
    extras = project["optional-dependencies"]
    assert extras["client"] == []
    server = " ".join(extras["server"])
    for package in ("psycopg", "redis", "fastapi", "mangum", "boto3", "aws-lambda-powertools"):
        assert package in server
    for extra in ("local", "infra"):
        assert "asyncz-serverless[server]" in extras[extra], extra


def test_the_async_client_resolves_lost_answers_and_partial_batches_alike() -> None:
    async def go() -> None:
        answers = iter(
            [
                httpx.ReadTimeout("lost"),
                reply(
                    409, {"error": "duplicate_idempotency_key", "message": "x", "job_id": "first"}
                ),
            ]
        )

        def submit(request: httpx.Request) -> httpx.Response:
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        async with AsyncClient("http://api.test", "k", transport=httpx.MockTransport(submit)) as c:
            assert (await c.submit("echo", idempotency_key="mine")).id == "first"
        calls = []

        def purge(request: httpx.Request) -> httpx.Response:
            calls.append(request.url.path)
            if len(calls) == 1:
                raise httpx.ReadTimeout("lost")
            return reply(404, {"error": "job_not_found", "message": "x"})

        async with AsyncClient("http://api.test", "k", transport=httpx.MockTransport(purge)) as c:
            await c.purge("j")
        assert calls == ["/dlq/j", "/dlq/j"]
        sizes: list[int] = []

        def failing(request: httpx.Request) -> httpx.Response:
            if sizes:
                raise httpx.ConnectError("down")
            return batch_handler(sizes)(request)

        async with AsyncClient(
            "http://api.test", "k", retries=0, transport=httpx.MockTransport(failing)
        ) as c:
            with pytest.raises(ConnectionFailed) as info:
                await c.submit_many([{"task": "echo", "payload": {"i": i}} for i in range(600)])
        assert len(info.value.submitted or []) == 500
        assert (info.value.call_key or "").startswith("asyncz-call-")

    asyncio.run(go())
