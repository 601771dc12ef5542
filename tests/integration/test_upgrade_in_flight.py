"""A deployed database crosses an upgrade with jobs in flight: queued, running (claimed by the
previous release, its attempt row open) and dead jobs all end, each attempt recorded once.
Workers of the previous release still run after the migrations did (an invocation lasts up
to 15 minutes): their statements (tests/support/previous_release.sql, word for word) claim,
heartbeat, complete and fail against the new schema beside the new code."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from asyncz.errors import DuplicateJobError
from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.store.migrations import apply_migrations, available_migrations
from asyncz.store.queries import _parse
from tests.support.databases import empty_backends
from tests.support.ledger import check_ledger, rows
from tests.support.settings import make_settings, open_service

pytestmark = pytest.mark.integration

# The first migration the previous release did not have
NEW_SINCE = "0017"
OLD: dict[str, Any] = {}
_parse((Path(__file__).parents[1] / "support" / "previous_release.sql").read_text(), OLD)


def old(conn: psycopg.Connection[Any], name: str, **params: Any) -> list[dict[str, Any]]:
    """Run one of the previous release's statements."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(OLD[name], params)
        return cur.fetchall()


@pytest.fixture
def upgraded() -> Settings:
    """A database at the previous release's schema (the test migrates it)."""
    database_url, redis_url = empty_backends("upgrade", 1)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        for version, sql in available_migrations():
            if version < NEW_SINCE:
                conn.execute(sql)  # type: ignore[arg-type]  # our own migration file
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    return make_settings(database_url, redis_url)


async def submit_keyed(settings: Settings) -> list[str]:
    """Three jobs with idempotency keys, one alone and two in a batch, each submitted
    twice: the ids of the jobs that hold the keys."""
    async with open_service(settings) as svc:
        try:
            one = (await svc.submit(NewJob(task="echo", payload={}, idempotency_key="k1"))).job_id
        except DuplicateJobError as held:
            one = held.job_id
        with pytest.raises(DuplicateJobError) as again:
            await svc.submit(NewJob(task="echo", payload={}, idempotency_key="k1"))
        batch = [NewJob(task="echo", payload={}, idempotency_key=k) for k in ("k2", "k3", "k2")]
        many = [item.job_id for item in await svc.submit_many(batch)]
    assert again.value.job_id == one and many[0] == many[2] != many[1]
    return [one, *many[:2]]  # type: ignore[list-item]


def test_jobs_in_flight_across_the_upgrade_all_end_with_each_attempt_once(
    upgraded: Settings,
) -> None:
    url = upgraded.database_url or ""

    async def submit(n: int) -> list[str]:
        async with open_service(upgraded) as svc:
            return [(await svc.submit(NewJob(task="echo", payload={"i": i}))).job_id
                    for i in range(n)]  # fmt: skip

    ids = asyncio.run(submit(6))
    # the new code runs before the migrations do (a deploy updates the functions first)
    keyed = asyncio.run(submit_keyed(upgraded))
    finishing, dying, failing, to_fail_dead, queued, claimed_late = ids
    with psycopg.connect(url, autocommit=True) as conn:
        # before the upgrade: the old release claims three jobs (rows opened at claim) and
        # dead-letters a fourth
        leases = {r["id"]: r["lease_token"] for r in old(
            conn, "claim_jobs", ids=[finishing, dying, failing, to_fail_dead], worker_id="old",
            max_timeout=900, nonce=uuid.uuid4().hex)}  # fmt: skip
        assert len(leases) == 4
        assert old(conn, "finish_failed_job", id=to_fail_dead, token=leases[to_fail_dead],
                   status="dead", outcome="failed", error="boom", delay_seconds=0.0)  # fmt: skip
    applied = apply_migrations(url)
    assert applied == [v for v, _ in available_migrations() if v >= NEW_SINCE]
    assert asyncio.run(submit_keyed(upgraded)) == keyed  # the same keys, the same jobs
    ids += sorted(set(keyed))

    async def read_attempts(job_id: str) -> list[Any]:
        async with open_service(upgraded) as svc:
            return await svc.attempts(job_id)

    # the running attempt opened by the old claim is listed once
    [running] = asyncio.run(read_attempts(finishing))
    assert (running.attempt, running.outcome, running.worker_id) == (1, None, "old")

    with psycopg.connect(url, autocommit=True) as conn:
        # after it: the old worker renews, completes and fails what it holds
        held = old(conn, "heartbeat_jobs", ids=[finishing, failing],
                   tokens=[leases[finishing], leases[failing]])  # fmt: skip
        assert {str(r["id"]) for r in held} == {finishing, failing}
        done = json.dumps([{"id": finishing, "token": leases[finishing], "result": {"ok": 1}}])
        assert [r["id"] for r in old(conn, "complete_jobs", done=done)] == [finishing]
        assert old(conn, "finish_failed_job", id=failing, token=leases[failing],
                   status="queued", outcome="failed", error="flaky", delay_seconds=0.0)  # fmt: skip
        # the old api's keyed submit: a second one with the same key inserts nothing
        keyed = {"task": "echo", "payload": "{}", "queue": "default", "priority": 0,
                 "max_retries": 0, "timeout_seconds": 30, "idempotency_key": "old-k",
                 "run_at": None, "delay_seconds": 0.0, "submitted_by": "old",
                 "submitted_by_key_id": None, "concurrency_key": None, "traceparent": None,
                 "tracestate": None}  # fmt: skip
        assert len(old(conn, "insert_job_idempotent", id=str(uuid.uuid4()), **keyed)) == 1
        assert old(conn, "insert_job_idempotent", id=str(uuid.uuid4()), **keyed) == []
        conn.execute("DELETE FROM jobs WHERE idempotency_key = 'old-k'")  # not in the ledger
        # and claims a job the new release enqueued, then completes it
        [late] = old(conn, "claim_jobs", ids=[claimed_late], worker_id="old", max_timeout=900,
                     nonce=uuid.uuid4().hex)  # fmt: skip
        done = json.dumps([{"id": claimed_late, "token": late["lease_token"], "result": None}])
        assert [r["id"] for r in old(conn, "complete_jobs", done=done)] == [claimed_late]
        # the worker holding `dying` died: its lease is long past
        conn.execute("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
                     (dying,))  # fmt: skip

    async def drain() -> None:
        async with open_service(upgraded) as svc:
            report = await svc.recover()
            assert report.requeued == [dying] and not report.failed
            await svc.replay(to_fail_dead)
            for _ in range(20):
                leases = await svc.claim_next("new", upgraded.queue_list, 10, 0.2, 900)
                for lease in leases:
                    assert await svc.complete(lease, {"new": True})
                if not leases and all(j.status.value == "completed" for j in
                                      [await svc.get(i) for i in ids]):  # fmt: skip
                    return
                await asyncio.sleep(0.1)

    asyncio.run(drain())
    book = check_ledger(url, ids)  # every job ended, attempts == rows, none left open
    assert book["status"] == {"completed": 9}
    outcomes = {i: list(book["jobs"][i]["outcomes"]) for i in ids[:6]}
    assert outcomes == {
        finishing: ["completed"],
        dying: ["lost", "completed"],
        failing: ["failed", "completed"],
        to_fail_dead: ["failed", "completed"],
        queued: ["completed"],
        claimed_late: ["completed"],
    }
    workers = rows(url, "SELECT job_id::text AS id, array_agg(worker_id ORDER BY attempt) AS w"
                        " FROM job_attempt_history GROUP BY 1")  # fmt: skip
    assert {r["id"]: r["w"] for r in workers}[dying] == ["old", "new"]


def test_a_running_job_without_a_start_time_is_recovered_with_its_lost_attempt(
    upgraded: Settings,
) -> None:
    """The lost attempt's row takes its start from the job's row: a row written by hand or
    by older code without one is still recovered (its attempt starts when it is lost)."""
    apply_migrations(upgraded.database_url or "")
    url = upgraded.database_url or ""
    job = str(uuid.uuid4())
    rows(url, "INSERT INTO jobs (id, task, status, attempts, lease_token, worker_id,"
              " heartbeat_at) VALUES (%s, 'echo', 'processing', 1, gen_random_uuid(), 'gone',"
              " now() - interval '1 hour')", (job,))  # fmt: skip

    async def recover() -> Any:
        async with open_service(upgraded) as svc:
            return await svc.recover()

    report = asyncio.run(recover())
    assert report.requeued == [job] and not report.failed
    [attempt] = rows(url, "SELECT attempt, worker_id, outcome, duration_ms FROM job_attempts")
    assert attempt == {"attempt": 1, "worker_id": "gone", "outcome": "lost", "duration_ms": 0}
