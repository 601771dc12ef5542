"""ctx.wait_for_event on PostgreSQL and Redis with a real worker loop and POST /events
through the api app: an event sent during the wait, or after the submit and before the wait
began, resumes the job with its payload; a wait with a 3-second timeout and no event returns
None and the job goes on; 20 concurrent POST /events for one waiting job resume it once;
what a waiting job shows, who sent the event (the audit trail), and bad requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest

from asyncz import composition
from asyncz.api.app import create_app
from asyncz.connections import hash_api_key
from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.tasks import TaskContext, task
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

KEY = "events-test-key-" + "e" * 24


@task("await_approval", durable=True, max_retries=0)
def _await_approval(payload: dict[str, Any], ctx: TaskContext) -> Any:
    if payload.get("nap"):
        ctx.sleep("nap", seconds=payload["nap"])
    approval = ctx.wait_for_event("approval", key=payload["order"],
                                  timeout=payload.get("timeout", 3600))  # fmt: skip
    return {"approval": approval, "shipped": ctx.step("ship", lambda: True)}


@task("await_ops_approval", durable=True, max_retries=0)
def _await_ops_approval(payload: dict[str, Any], ctx: TaskContext) -> Any:
    return ctx.wait_for_event("approval", key=payload["order"], timeout=3600, senders=["ops"])


@asynccontextmanager
async def _api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The api app over HTTP (in-process: ASGI), its configured key having every scope."""
    app_settings = settings.model_copy(update={"api_key_hashes": hash_api_key(KEY),
                                               "db_pool_max": 10})  # fmt: skip
    transport = httpx.ASGITransport(app=create_app(app_settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://api",
                                 headers={"x-api-key": KEY}) as client:  # fmt: skip
        try:
            yield client
        finally:
            await composition.close_service(await composition.current_service(app_settings))


Body = Callable[[Any, httpx.AsyncClient], Awaitable[None]]


def _run(settings: Settings, body: Body) -> None:
    async def go() -> None:
        async with open_service(settings) as svc, _api(settings) as api:
            await body(svc, api)

    asyncio.run(go())


async def _until(svc: Any, job_id: str, done: Callable[[Any], bool]) -> Any:
    for _ in range(300):  # a bound against a hang, not a figure
        job = await svc.get(job_id)
        if done(job):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id}: {job.status}")


async def _submit(svc: Any, **payload: Any) -> str:
    return str((await svc.submit(NewJob(task="await_approval", payload=payload))).job_id)


async def _send(api: httpx.AsyncClient, order: str, payload: Any) -> httpx.Response:
    return await api.post("/events", json={"name": "approval", "key": order, "payload": payload})


def test_an_event_sent_during_the_wait_resumes_the_job_with_its_payload(
    settings: Settings,
) -> None:
    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        async with running_worker(svc):
            job_id = await _submit(svc, order="order:1")
            await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED)
            shown = (await api.get(f"/jobs/{job_id}")).json()
            assert shown["waiting_for"].startswith("event 'approval' key 'order:1' until ")
            reply = await _send(api, "order:1", {"by": "alice"})
            assert reply.status_code == 202 and reply.json()["woken"] == 1
            job = await _until(svc, job_id, lambda j: j.status.terminal)
        assert (job.status, job.result) == (
            JobStatus.COMPLETED, {"approval": {"by": "alice"}, "shipped": True})  # fmt: skip
        assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "completed"]
        [entry] = (await api.get("/audit", params={"action": "event.send"})).json()["items"]
        assert (entry["key_name"], entry["target"], entry["outcome"]) == (
            "configured", "approval", "ok")  # fmt: skip
        assert entry["detail"]["key"] == "order:1" and entry["detail"]["woken"] == 1

    _run(settings, body)


def test_an_event_sent_after_the_submit_before_the_wait_began_resumes_the_job(
    settings: Settings,
) -> None:
    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        async with running_worker(svc):
            job_id = await _submit(svc, order="order:2", nap=2)
            job = await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED)
            assert (job.suspended_for or "").startswith("sleep 'nap'")  # not waiting yet
            reply = await _send(api, "order:2", "early")
            assert reply.status_code == 202 and reply.json()["woken"] == 0  # kept, not lost
            job = await _until(svc, job_id, lambda j: j.status.terminal)
        assert (job.status, job.result) == (
            JobStatus.COMPLETED, {"approval": "early", "shipped": True})  # fmt: skip
        # the wait found the event by itself: it never suspended for it
        assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "completed"]

    _run(settings, body)


def test_a_wait_with_a_3_second_timeout_and_no_event_returns_none_and_the_job_goes_on(
    settings: Settings,
) -> None:
    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        async with running_worker(svc):
            job_id = await _submit(svc, order="order:3", timeout=3)
            job = await _until(svc, job_id, lambda j: j.status.terminal)
        assert (job.status, job.result) == (
            JobStatus.COMPLETED, {"approval": None, "shipped": True})  # fmt: skip
        assert (await _send(api, "order:3", "late")).json()["woken"] == 0  # the timeout won

    _run(settings, body)


def test_twenty_concurrent_events_for_one_waiting_job_resume_it_once(settings: Settings) -> None:
    url = settings.database_url or ""

    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        async with running_worker(svc):
            job_id = await _submit(svc, order="order:4")
            await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED)
        replies = await asyncio.gather(*(_send(api, "order:4", n) for n in range(20)))
        assert [r.status_code for r in replies] == [202] * 20
        assert sum(r.json()["woken"] for r in replies) == 1
        async with running_worker(svc):
            job = await _until(svc, job_id, lambda j: j.status.terminal)
        taken = job.result["approval"]
        assert job.status is JobStatus.COMPLETED and taken in range(20)
        assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "completed"]
        with psycopg.connect(url) as conn:
            events, woke = conn.execute("SELECT count(*), sum(woke) FROM events").fetchone()  # type: ignore[misc]
        assert (events, woke) == (20, 1)  # every event kept, one taken

    _run(settings, body)


def test_an_event_for_nothing_waiting_and_bad_requests_are_answered_as_such(
    settings: Settings,
) -> None:
    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        reply = await _send(api, "nobody", {"x": 1})
        assert reply.status_code == 202 and reply.json()["woken"] == 0
        for bad, code in (
            ({"key": "k"}, "validation_error"),  # no name
            ({"name": "a", "key": ""}, "validation_error"),
            ({"name": "a" * 101, "key": "k"}, "validation_error"),
            ({"name": "a", "key": "k", "paylod": 1}, "validation_error"),  # a typo
            ({"name": "a", "key": "k", "payload": "\u0000"}, "invalid_payload"),
        ):
            reply = await api.post("/events", json=bad)
            assert (reply.status_code, reply.json()["error"]) == (422, code), bad
        reply = await api.post("/events", content=b"{not json",
                               headers={"content-type": "application/json"})  # fmt: skip
        assert (reply.status_code, reply.json()["error"]) == (422, "invalid_json")
        made = await api.post("/keys", json={"name": "reader", "scopes": ["read"]})
        refused = await api.post("/events", json={"name": "a", "key": "k"},
                                 headers={"x-api-key": made.json()["key"]})  # fmt: skip
        assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")

    _run(settings, body)


def test_a_wait_that_names_its_senders_is_woken_by_their_key_only_and_the_audit_says_who(
    settings: Settings,
) -> None:
    async def body(svc: Any, api: httpx.AsyncClient) -> None:
        keys = {}
        for name, scopes in (("ops", ["events"]), ("intruder", ["events"])):
            made = await api.post("/keys", json={"name": name, "scopes": scopes})
            keys[name] = {"x-api-key": made.json()["key"]}
        async with running_worker(svc):
            new = NewJob(task="await_ops_approval", payload={"order": "order:5"})
            job_id = str((await svc.submit(new)).job_id)
            await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED)
            body = {"name": "approval", "key": "order:5", "payload": "forged"}
            for who in ("intruder", None):  # None: the configured key
                reply = await api.post("/events", json=body, headers=keys.get(who or "", {}))
                assert (reply.status_code, reply.json()["woken"]) == (202, 0), who
            reply = await api.post("/events", json=body | {"payload": "real"}, headers=keys["ops"])
            assert reply.json()["woken"] == 1
            job = await _until(svc, job_id, lambda j: j.status.terminal)
        assert (job.status, job.result) == (JobStatus.COMPLETED, "real")
        entries = (await api.get("/audit", params={"action": "event.send"})).json()["items"]
        assert [(e["key_name"], e["detail"]["woken"]) for e in entries] == [
            ("ops", 1), ("configured", 0), ("intruder", 0)]  # newest first  # fmt: skip

    _run(settings, body)
