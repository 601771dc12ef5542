"""Durable tasks on PostgreSQL and Redis with a real worker loop: steps run once per job
across retries, a changed task ends dead as nondeterministic and a replay with its steps
reset (through the API) runs it, a step's write holds the job row against a lease change,
and GET /jobs/{id}/steps pages through what was stored."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.store.queries import QUERIES
from asyncz.tasks import TaskContext, task
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

CALLS: Counter[str] = Counter()
RENAMED = {"second": "draft"}


def _side_effect(name: str, value: Any) -> Any:
    CALLS[name] += 1
    return value


def _flaky_third() -> str:
    CALLS["third"] += 1
    if CALLS["third"] < 3:
        raise RuntimeError(f"third failed ({CALLS['third']})")
    return "three"


@task("durable_chain", durable=True)
def _durable_chain(payload: dict[str, Any], ctx: TaskContext) -> Any:
    one = ctx.step("first", _side_effect, "first", 1)
    two = ctx.step("second", _side_effect, "second", one + 1)
    return [one, two, ctx.step("third", _flaky_third)]


@task("durable_renamed", durable=True)
def _durable_renamed(payload: dict[str, Any], ctx: TaskContext) -> Any:
    ctx.step("outline", _side_effect, "outline", "o")
    name = RENAMED["second"]
    text = ctx.step(name, _side_effect, name, "t")
    if name == "draft":
        RENAMED["second"] = "draft-v2"  # a deploy renames the step before the retry
        raise RuntimeError("the first attempt fails after its steps")
    return text


@task("durable_gather", durable=True)
async def _durable_gather(payload: dict[str, Any], ctx: TaskContext) -> Any:
    async def chapter(i: int) -> str:
        CALLS[f"chapter:{i}"] += 1
        await asyncio.sleep(0.05 * (3 - i))  # the last finishes first
        return f"c{i}"

    parts = await asyncio.gather(*(ctx.step(f"chapter:{i}", chapter, i) for i in range(3)))
    if CALLS["gather_attempt"] == 0:
        CALLS["gather_attempt"] += 1
        raise RuntimeError("fail once after the gather")
    return await ctx.step("merge", "+".join, parts)


def _run_until_done(
    settings: Settings, new: NewJob, then: Callable[[str], None] | None = None
) -> str:
    fast = settings.model_copy(update={"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1,
                                       "worker_poll_seconds": 0.2})  # fmt: skip

    async def go() -> str:
        async with open_service(fast) as svc:
            job_id = (await svc.submit(new)).job_id
            async with running_worker(svc):
                while not (await svc.get(job_id)).status.terminal:
                    await asyncio.sleep(0.05)
            return job_id

    return asyncio.run(go())


def test_a_durable_job_retries_its_failing_third_step_and_runs_the_first_two_once(
    settings: Settings, api: Any
) -> None:
    CALLS.clear()
    job_id = _run_until_done(settings, NewJob(task="durable_chain", payload={}, max_retries=3))
    job = api("GET", f"/jobs/{job_id}").json()
    assert (job["status"], job["result"]) == ("completed", [1, 2, "three"])
    assert CALLS == {"first": 1, "second": 1, "third": 3}
    attempts = api("GET", f"/jobs/{job_id}/attempts").json()["items"]
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "completed"]
    steps = api("GET", f"/jobs/{job_id}/steps").json()
    assert steps["next_cursor"] is None
    assert [(s["name"], s["status"], s["attempts"], s["job_attempt"]) for s in steps["items"]] == [
        ("first", "completed", 1, 1), ("second", "completed", 1, 1), ("third", "completed", 3, 3)
    ]  # fmt: skip
    assert all(s["result_bytes"] > 0 and s["duration_ms"] >= 0 for s in steps["items"])


def test_a_renamed_step_ends_dead_and_a_replay_with_steps_reset_runs_it(
    settings: Settings, api: Any
) -> None:
    CALLS.clear()
    RENAMED["second"] = "draft"
    job_id = _run_until_done(settings, NewJob(task="durable_renamed", payload={}, max_retries=5))
    job = api("GET", f"/jobs/{job_id}").json()
    assert job["status"] == "dead" and job["attempts"] == 2  # no loop: not retried
    assert job["last_error"].startswith(
        "nondeterministic: the task asks for step 'draft-v2' after step 'outline', where its "
        "history has step 'draft'"
    )
    assert CALLS == {"outline": 1, "draft": 1}
    plain = api("POST", f"/dlq/{job_id}/replay", body={"reset_steps": "maybe"})
    assert plain.status == 422  # a bad option is refused, nothing replayed
    assert api("GET", f"/jobs/{job_id}").json()["status"] == "dead"
    replayed = api("POST", f"/dlq/{job_id}/replay", body={"reset_steps": True})
    assert replayed.status == 200 and replayed.json()["status"] == "queued"
    assert api("GET", f"/jobs/{job_id}/steps").json()["items"] == []

    async def finish() -> None:
        async with open_service(settings) as svc, running_worker(svc):
            while not (await svc.get(job_id)).status.terminal:
                await asyncio.sleep(0.05)

    asyncio.run(finish())
    job = api("GET", f"/jobs/{job_id}").json()
    assert (job["status"], job["result"]) == ("completed", "t")
    names = [s["name"] for s in api("GET", f"/jobs/{job_id}/steps").json()["items"]]
    assert names == ["outline", "draft-v2"]
    audit = api("GET", "/audit?action=replay").json()["items"][0]
    assert audit["detail"] == {"reset_steps": True}


def test_an_async_gather_replays_its_steps_in_whatever_order_they_finished(
    settings: Settings, api: Any
) -> None:
    CALLS.clear()
    job_id = _run_until_done(settings, NewJob(task="durable_gather", payload={}, max_retries=1))
    job = api("GET", f"/jobs/{job_id}").json()
    assert (job["status"], job["result"]) == ("completed", "c0+c1+c2"), job["last_error"]
    assert {k: v for k, v in CALLS.items() if k.startswith("chapter")} == {
        "chapter:0": 1, "chapter:1": 1, "chapter:2": 1}  # fmt: skip


def test_steps_are_listed_a_page_at_a_time_and_bad_requests_say_why(
    settings: Settings, api: Any
) -> None:
    CALLS.clear()
    job_id = _run_until_done(settings, NewJob(task="durable_chain", payload={}, max_retries=3))
    first = api("GET", f"/jobs/{job_id}/steps?limit=2").json()
    assert [s["name"] for s in first["items"]] == ["first", "second"]
    rest = api("GET", f"/jobs/{job_id}/steps?limit=2&cursor={first['next_cursor']}").json()
    assert [s["name"] for s in rest["items"]] == ["third"] and rest["next_cursor"] is None
    bad = api("GET", f"/jobs/{job_id}/steps?cursor=abc")
    assert bad.status == 422 and bad.json()["error"] == "invalid_cursor"
    gone = api("GET", "/jobs/00000000-0000-4000-8000-000000000000/steps")
    assert gone.status == 404 and gone.json()["error"] == "job_not_found"


def test_a_steps_write_holds_the_job_row_so_a_lease_change_waits_for_its_commit(
    settings: Settings,
) -> None:
    url = settings.database_url or ""

    async def claimed() -> tuple[str, str]:
        async with open_service(settings) as svc:
            job_id = (await svc.submit(NewJob(task="echo", payload={}))).job_id
            [lease] = await svc.claim_next("w-1", settings.queue_list, 1, 2.0, 3600)
            return job_id, lease.token

    job_id, token = asyncio.run(claimed())
    step = {"job_id": job_id, "token": token, "seq": 1, "name": "s", "kind": "step",
            "after_name": None, "status": "completed", "result": "1", "result_bytes": 1,
            "error": None, "attempts": 1, "job_attempt": 1, "seconds": 0.0}  # fmt: skip
    fail = {"id": job_id, "token": token, "status": "queued", "outcome": "failed",
            "error": "x", "delay_seconds": 0.0}  # fmt: skip
    with psycopg.connect(url) as writer, psycopg.connect(url, autocommit=True) as other:
        assert writer.execute(QUERIES["save_step"], step).fetchone() is not None  # not committed
        other.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute(QUERIES["finish_failed_job"], fail)  # the lease cannot move meanwhile
        done = threading.Event()

        def end_the_attempt() -> None:
            other.execute("SET lock_timeout = 0")
            other.execute(QUERIES["finish_failed_job"], fail)
            done.set()

        ender = threading.Thread(target=end_the_attempt)
        ender.start()
        assert not done.wait(0.3)  # waiting for the step's commit
        writer.commit()
        ender.join(10)
        assert done.is_set()
        # the lease has moved on: a late write with the old token stores nothing
        late = {**step, "seq": 2, "name": "late"}
        assert writer.execute(QUERIES["save_step"], late).fetchone() is None
        writer.commit()
        names = [r[0] for r in other.execute("SELECT name FROM job_steps WHERE job_id = %s",
                                             (job_id,))]  # fmt: skip
    assert names == ["s"]


def test_a_submit_only_key_reads_the_steps_of_its_own_jobs_and_no_others(api: Any) -> None:
    keys = {}
    for name in ("alice", "bob"):
        reply = api("POST", "/keys", body={"name": name, "scopes": ["submit"]})
        assert reply.status == 201, reply.body
        keys[name] = reply.json()["key"]
    body = {"task": "echo", "payload": {}}
    job = api("POST", "/jobs", key=keys["alice"], body=body).json()["job_id"]
    mine = api("GET", f"/jobs/{job}/steps", key=keys["alice"])
    assert (mine.status, mine.json()["items"]) == (200, [])
    theirs = api("GET", f"/jobs/{job}/steps", key=keys["bob"])
    assert (theirs.status, theirs.json()["error"]) == (403, "forbidden")
    assert (
        api("POST", f"/dlq/{job}/replay", key=keys["alice"], body={"reset_steps": True}).status
        == 403
    )


@task("durable_limits", durable=True)
async def _durable_limits(payload: dict[str, Any], ctx: TaskContext) -> Any:
    kind = payload["kind"]
    if kind == "big":
        return await ctx.step("big", lambda: "x" * 2000)
    if kind == "many":
        return [await ctx.step(f"s:{i}", int, i) for i in range(4)]
    await ctx.step("twice", lambda: 1)
    return await ctx.step("twice", lambda: 2)


@pytest.mark.parametrize(
    ("kind", "error", "stored"),
    [
        ("big", "step_limit: step 'big' returned 2002 bytes of JSON; the limit is 1000", []),
        ("many", "step_limit: step 's:3' was not run", ["s:0", "s:1", "s:2"]),
        ("twice", "step_usage: step name 'twice' is used twice in this job", ["twice"]),
    ],
)
def test_an_async_durable_job_past_a_limit_or_reusing_a_name_ends_dead_at_once(
    settings: Settings, api: Any, kind: str, error: str, stored: list[str]
) -> None:
    tight = settings.model_copy(update={"max_result_bytes": 1000, "max_steps_per_job": 3})
    new = NewJob(task="durable_limits", payload={"kind": kind}, max_retries=3)
    job_id = _run_until_done(tight, new)
    job = api("GET", f"/jobs/{job_id}").json()
    assert (job["status"], job["attempts"]) == ("dead", 1)
    assert job["last_error"].startswith(error), job["last_error"]
    assert [s["name"] for s in api("GET", f"/jobs/{job_id}/steps").json()["items"]] == stored
