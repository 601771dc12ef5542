"""Unique jobs and debounce through the api Lambda handler (API Gateway events, REST and
HTTP API) and the service: one job per key within its scope, also for concurrent submits
and within a batch; debounce; refusals; Redis put right by recovery."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis

from asyncz.api import handler as api_handler
from asyncz.client import Client, UniqueKeyHeld
from asyncz.jobs import NewJob, UniqueScope
from asyncz.port_types import epoch_ms
from asyncz.settings import Settings
from tests.support.api_lambda import FLAVOURS, KEY, drain
from tests.support.apigw import call
from tests.support.ledger import rows
from tests.support.settings import open_service

pytestmark = pytest.mark.integration


def count(settings: Settings) -> int:
    return int(rows(settings.database_url, "SELECT count(*) AS n FROM jobs")[0]["n"])


def delayed(settings: Settings) -> dict[bytes, float]:
    r = redis.Redis.from_url(settings.redis_url or "")
    key = f"{settings.redis_prefix}:{{default}}:delayed"
    return dict(r.zrange(key, 0, -1, withscores=True))


@FLAVOURS
def test_unique_while_queued_answers_with_the_first_job_until_it_completes(
    api: Any, api_settings: Settings
) -> None:
    body = {"task": "echo", "payload": {"n": 1}, "unique_key": "reindex:42",
            "unique_scope": "queued"}  # fmt: skip
    first = api("POST", "/jobs", body=body)
    assert first.status == 202, first.json()
    job_id = first.json()["job_id"]
    second = api("POST", "/jobs", body={**body, "payload": {"n": 2}})
    assert second.status == 200, second.json()
    assert second.json() == {"job_id": job_id, "status": "queued", "duplicate": True,
                             "debounced": False}  # fmt: skip
    assert second.headers["location"] == f"/jobs/{job_id}"
    assert count(api_settings) == 1
    shown = api("GET", f"/jobs/{job_id}").json()
    assert (shown["unique_key"], shown["unique_scope"], shown["payload"]) == (
        "reindex:42", "queued", {"n": 1})  # fmt: skip

    drain(api_settings, lambda: api("GET", f"/jobs/{job_id}").json()["status"] == "completed")
    third = api("POST", "/jobs", body=body)
    assert third.status == 202 and third.json()["job_id"] != job_id, third.json()
    assert count(api_settings) == 2


def test_each_scope_frees_the_key_when_its_holder_leaves_it(settings: Settings) -> None:
    async def scenario() -> dict[str, list[bool]]:
        seen: dict[str, list[bool]] = {}
        async with open_service(settings) as svc:
            for scope in UniqueScope:
                key = f"scope-{scope}"
                new = NewJob(task="echo", payload={}, unique_key=key, unique_scope=scope,
                             unique_for=3600 if scope is UniqueScope.PERIOD else None)  # fmt: skip
                first = await svc.submit(new)
                # (the ids of the jobs cancelled before are popped too, and not claimed)
                [lease] = await svc.claim_next("w", ["default"], 10, 1, 3600)
                assert lease.job_id == first.job_id
                running = await svc.submit(new)
                if not running.duplicate:  # a new holder: cancelled, it holds nothing
                    await svc.cancel(running.job_id)
                await svc.complete(lease, {})
                ended = await svc.submit(new)
                if not ended.duplicate:
                    await svc.cancel(ended.job_id)
                seen[scope] = [running.duplicate, ended.duplicate]
        return seen

    assert asyncio.run(scenario()) == {
        "queued": [False, False],
        "queued_or_running": [True, False],
        "period": [True, True],
    }


def test_a_period_key_is_free_again_once_its_period_has_passed(settings: Settings) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with open_service(settings) as svc:
            new = NewJob(task="echo", payload={}, unique_key="hourly", unique_for=3600,
                         unique_scope=UniqueScope.PERIOD)  # fmt: skip
            first = await svc.submit(new)
            inside = await svc.submit(new)
            rows(settings.database_url, "UPDATE jobs SET unique_until = now() - interval '1 s'")
            after = await svc.submit(new)
            return first, inside, after

    first, inside, after = asyncio.run(scenario())
    assert inside.duplicate and inside.job_id == first.job_id
    assert not after.duplicate and after.job_id != first.job_id
    held = rows(settings.database_url, "SELECT id::text AS id, unique_until FROM jobs")
    assert {r["id"]: r["unique_until"] is None for r in held} == {
        first.job_id: True, after.job_id: False}  # fmt: skip


@FLAVOURS
def test_debounce_replaces_the_payload_and_moves_the_start_of_the_one_job(
    api: Any, api_settings: Settings
) -> None:
    body = {"task": "echo", "unique_key": "digest:7", "debounce": True}
    first = api("POST", "/jobs", body={**body, "payload": {"v": 1}, "delay_seconds": 60})
    assert first.status == 202, first.json()
    job_id = first.json()["job_id"]
    before = api("GET", f"/jobs/{job_id}").json()["run_at"]
    later = api("POST", "/jobs", body={**body, "payload": {"v": 2}, "delay_seconds": 600})
    assert later.status == 200, later.json()
    assert later.json() == {"job_id": job_id, "status": "queued", "duplicate": True,
                            "debounced": True}  # fmt: skip
    job = api("GET", f"/jobs/{job_id}").json()
    assert job["payload"] == {"v": 2} and job["run_at"] > before
    assert count(api_settings) == 1
    run_at = datetime.fromisoformat(job["run_at"].replace("Z", "+00:00"))
    assert delayed(api_settings) == {f"0|{job_id}".encode(): epoch_ms(run_at)}

    now = api("POST", "/jobs", body={**body, "payload": {"v": 3}})
    assert now.status == 200 and now.json()["debounced"] is True
    assert delayed(api_settings) == {}  # due now: moved to ready
    drain(api_settings, lambda: api("GET", f"/jobs/{job_id}").json()["status"] == "completed")
    assert api("GET", f"/jobs/{job_id}").json()["result"] == {"v": 3}
    assert count(api_settings) == 1


def test_recovery_puts_a_debounced_start_right_after_redis_lost_it(settings: Settings) -> None:
    async def scenario() -> str:
        async with open_service(settings) as svc:
            new = NewJob(task="echo", payload={}, unique_key="r", debounce=True,
                         delay_seconds=60)  # fmt: skip
            first = await svc.submit(new)
            moved = await svc.submit(NewJob(**{**_fields(new), "delay_seconds": 900}))
            assert moved.debounced and moved.job_id == first.job_id
            redis.Redis.from_url(settings.redis_url or "").flushdb()
            await svc.recover()
            return first.job_id

    job_id = asyncio.run(scenario())
    [row] = rows(settings.database_url, "SELECT run_at FROM jobs")
    assert row["run_at"] > datetime.now(UTC) + timedelta(seconds=600)
    assert delayed(settings) == {f"0|{job_id}".encode(): epoch_ms(row["run_at"])}


def _fields(new: NewJob) -> dict[str, Any]:
    return {f: getattr(new, f) for f in new.__dataclass_fields__}


def test_twenty_concurrent_submits_with_one_key_make_one_job(settings: Settings) -> None:
    async def scenario() -> list[Any]:
        async with AsyncExitStack() as stack:
            return await submit_all(stack)

    async def submit_all(stack: AsyncExitStack) -> list[Any]:
        services = [await stack.enter_async_context(open_service(settings)) for _ in range(5)]
        new = NewJob(task="echo", payload={}, unique_key="burst")
        return await asyncio.gather(*(services[i % 5].submit(new) for i in range(20)))

    results = asyncio.run(scenario())
    created = [r for r in results if not r.duplicate]
    assert len(created) == 1 and count(settings) == 1
    assert {r.job_id for r in results} == {created[0].job_id}


@FLAVOURS
def test_a_batch_stores_the_first_item_of_a_key_and_names_it_for_the_rest(
    api: Any, api_settings: Settings
) -> None:
    held = api("POST", "/jobs", body={"task": "echo", "unique_key": "held"}).json()["job_id"]
    batch = {"jobs": [{"task": "echo", "unique_key": "k"},
                      {"task": "echo", "payload": {"plain": True}},
                      {"task": "echo", "unique_key": "k", "unique_scope": "queued"},
                      {"task": "echo", "unique_key": "held"}]}  # fmt: skip
    reply = api("POST", "/jobs/batch", body=batch)
    assert reply.status == 202, reply.json()
    items = reply.json()["jobs"]
    assert [i["duplicate"] for i in items] == [False, False, True, True]
    assert items[2]["job_id"] == items[0]["job_id"] and items[3]["job_id"] == held
    assert (reply.json()["accepted"], reply.json()["duplicates"]) == (2, 2)
    assert count(api_settings) == 3


@FLAVOURS
@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"task": "echo", "unique_key": ""}, "/jobs"),
        ({"task": "echo", "unique_key": "x" * 201}, "/jobs"),
        ({"task": "echo", "unique_key": "a\u0000b"}, "/jobs"),
        ({"task": "echo", "unique_key": "k", "unique_scope": "forever"}, "/jobs"),
        ({"task": "echo", "unique_key": "k", "unique_scope": "period"}, "/jobs"),
        ({"task": "echo", "unique_key": "k", "unique_scope": "queued", "unique_for": 60},
         "/jobs"),
        ({"task": "echo", "unique_key": "k", "unique_for": 0}, "/jobs"),
        ({"task": "echo", "unique_scope": "queued"}, "/jobs"),
        ({"task": "echo", "debounce": True}, "/jobs"),
        ({"task": "echo", "unique_key": "k", "depends_on": [str(uuid.uuid4())]}, "/jobs"),
        ({"jobs": [{"task": "echo"}, {"task": "echo", "unique_key": "k", "debounce": True}]},
         "/jobs/batch"),
        ({"jobs": [{"task": "echo", "ref": "a"}, {"task": "echo", "unique_key": "k"}]},
         "/jobs/batch"),
    ],
)  # fmt: skip
def test_bad_unique_input_is_422_and_stores_nothing(
    api: Any, api_settings: Settings, body: dict[str, Any], path: str
) -> None:
    reply = api("POST", path, body=body)
    assert reply.status == 422, reply.json()
    assert reply.json()["error"] == "validation_error" and reply.json()["message"]
    if path == "/jobs/batch":
        assert reply.json()["index"] == 1
    assert count(api_settings) == 0


def handler_client(flavour: str, key: str = KEY) -> Client:
    """The real client, its requests turned into API Gateway events for the api handler."""

    def handle(request: httpx.Request) -> httpx.Response:
        reply = call(api_handler.handler, request.method, request.url.raw_path.decode(),
                     api_key=key, flavour=flavour, raw_body=request.content,
                     headers={"Content-Type": "application/json"})  # fmt: skip
        return httpx.Response(reply.status, content=reply.body, headers=reply.headers)

    return Client("http://api.test", key, transport=httpx.MockTransport(handle))


def submit_key(api: Any, name: str) -> str:
    reply = api("POST", "/keys", body={"name": name, "scopes": ["submit"]})
    assert reply.status == 201, reply.body
    return str(reply.json()["key"])


def test_a_debounce_from_another_key_or_task_changes_nothing_and_names_no_holder(
    api: Any, flavour: str
) -> None:
    billing, search = submit_key(api, "billing-svc"), submit_key(api, "search-svc")
    body = {"task": "echo", "unique_key": "order:9", "delay_seconds": 60, "payload": {"v": 1}}
    first = api("POST", "/jobs", key=billing, body=body)
    assert first.status == 202, first.json()
    job_id = first.json()["job_id"]
    before = api("GET", f"/jobs/{job_id}").json()
    evil = {"unique_key": "order:9", "debounce": True, "delay_seconds": 3600,
            "payload": {"evil": True}}  # fmt: skip
    for task in ("echo", "sleep"):  # another key: refused, and told nothing of the holder
        held = api("POST", "/jobs", key=search, body={**evil, "task": task})
        assert held.status == 409, held.json()
        assert held.json()["error"] == "unique_key_held"
        assert job_id not in held.body.decode() and "queued" not in held.json()["message"]
    # the same key, another task: the holder is named, and not changed
    other_task = api("POST", "/jobs", key=billing, body={**evil, "task": "sleep"})
    assert other_task.status == 200, other_task.json()
    assert other_task.json() == {"job_id": job_id, "status": "queued", "duplicate": True,
                                 "debounced": False}  # fmt: skip
    after = api("GET", f"/jobs/{job_id}").json()
    assert (after["payload"], after["run_at"]) == (before["payload"], before["run_at"])
    batch = api("POST", "/jobs/batch", key=search,
                body={"jobs": [{"task": "echo", "unique_key": "order:9"}]})  # fmt: skip
    assert batch.json()["jobs"] == [{"job_id": None, "status": "unique_key_held",
                                     "duplicate": True, "unique": True}]  # fmt: skip
    with handler_client(flavour, search) as client, pytest.raises(UniqueKeyHeld):
        client.submit("echo", {"v": 2}, unique_key="order:9", debounce=True)
    with handler_client(flavour, billing) as client:
        mine = client.submit("echo", {"v": 3}, unique_key="order:9", debounce=True)
    assert (mine.id, mine.debounced) == (job_id, True)
    assert api("GET", f"/jobs/{job_id}").json()["payload"] == {"v": 3}


@FLAVOURS
def test_the_client_returns_the_holders_id_and_shows_the_key(api: Any, flavour: str) -> None:
    with handler_client(flavour) as client:
        first = client.submit("echo", {"v": 1}, unique_key="client:1", delay_seconds=60)
        again = client.submit("echo", {"v": 2}, unique_key="client:1")
        moved = client.submit("echo", {"v": 3}, unique_key="client:1", debounce=True,
                              delay_seconds=120)  # fmt: skip
        assert (first.duplicate, again.duplicate, moved.duplicate) == (False, True, True)
        assert again.id == moved.id == first.id and moved.debounced and not again.debounced
        job = client.get(first.id)
        assert (job.unique_key, job.unique_scope, job.payload) == (
            "client:1", "queued_or_running", {"v": 3})  # fmt: skip
        jobs = client.submit_many([{"task": "echo", "unique_key": "client:1"},
                                   {"task": "echo", "unique_key": "client:2"},
                                   {"task": "echo", "unique_key": "client:2"}])  # fmt: skip
        assert [j.duplicate for j in jobs] == [True, False, True]
        assert jobs[0].id == first.id and jobs[2].id == jobs[1].id


def test_a_replayed_job_holds_no_key_and_runs_beside_the_newer_holder(settings: Settings) -> None:
    async def scenario() -> tuple[Any, ...]:
        async with open_service(settings) as svc:
            new = NewJob(task="echo", payload={}, unique_key="again", max_retries=0)
            first = await svc.submit(new)
            [lease] = await svc.claim_next("w", ["default"], 1, 1, 3600)
            assert (await svc.fail(lease, "boom")).status == "dead"
            second = await svc.submit(new)  # the dead job is out of its scope
            replayed = await svc.replay(first.job_id)  # no clash with the holder
            third = await svc.submit(new)
            return first, second, replayed, third

    first, second, replayed, third = asyncio.run(scenario())
    assert not second.duplicate and second.job_id != first.job_id
    assert replayed.status == "queued" and replayed.unique_key == "again"
    assert third.duplicate and third.job_id == second.job_id
