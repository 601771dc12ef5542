"""Events on PostgreSQL, at the store: a delivery and a wait's look-back on the same name and
key, each held open while the other starts (either commits first: the wait gets the event
exactly once, never neither); a wait looks back only at events since its job's submit; a
delivery in pages wakes every waiting job once; retention deletes events a page at a time."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from asyncz.durable.events import wait_key
from asyncz.settings import Settings
from asyncz.store.queries import QUERIES
from tests.support.contract import new
from tests.support.settings import open_service

pytestmark = pytest.mark.integration

ROUTE = wait_key("approval", "order:1")


def _wait_row(seq: int = 1, terms: Any = None) -> dict[str, Any]:
    return {"seq": seq, "name": f"event:approval:{seq}", "kind": "event", "after_name": None,
            "job_attempt": 1, "result": None if terms is None else json.dumps(terms),
            "wait_until": datetime.now(UTC) + timedelta(hours=1), "wait_key": ROUTE}  # fmt: skip


def _event(payload: Any = "p", sender: str | None = "ops") -> dict[str, Any]:
    return {"name": "approval", "key": "order:1", "wait_key": ROUTE,
            "payload": json.dumps(payload), "sent_by": sender, "sent_by_key_id": None}  # fmt: skip


async def _running(svc: Any) -> tuple[str, Any]:
    job_id = str(uuid.uuid4())
    await svc.store.insert_job(job_id, new())
    [lease] = await svc.store.claim([job_id], "w", 3600)
    return job_id, lease


async def _held_then(url: str, statements: list[tuple[str, dict[str, Any]]],
                     other: Callable[[], Any]) -> Any:  # fmt: skip
    """Run ``statements`` in one transaction held open while ``other()`` starts and blocks on
    it, then commit; what ``other()`` answered."""
    with psycopg.connect(url) as conn:
        for name, params in statements:
            conn.execute(QUERIES[name], params)
        pid = conn.info.backend_pid
        started = asyncio.create_task(other())
        blocked = 0
        for _ in range(500):  # a bound against a hang: the other transaction reaches the lock
            await asyncio.sleep(0.01)
            with psycopg.connect(url, autocommit=True) as probe:
                blocked = probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                    (pid,),
                ).fetchone()[0]  # type: ignore[index]
            if blocked:
                break
        assert blocked and not started.done()  # it waits for this transaction
        conn.commit()
    return await started


def _run(settings: Settings, body: Callable[[Any], Any]) -> None:
    async def go() -> None:
        async with open_service(settings) as svc:
            await body(svc)

    asyncio.run(go())


def test_a_wait_that_begins_while_a_delivery_commits_finds_the_event(settings: Settings) -> None:
    url = settings.database_url or ""

    async def body(svc: Any) -> None:
        job_id, lease = await _running(svc)
        delivery = [("lock_event_wait", {"wait_key": ROUTE}), ("insert_event", _event("first"))]
        found = await _held_then(
            url, delivery, lambda: svc.store.steps.open_wait(job_id, lease.token, _wait_row())
        )
        # without the lock, its look-back would have read before the event's commit, and the
        # delivery (before the wait's commit) found no wait: the event lost
        assert found["status"] == "completed" and found["result"]["payload"] == "first"

    _run(settings, body)


def test_a_delivery_that_starts_while_a_wait_is_stored_resolves_it(settings: Settings) -> None:
    url = settings.database_url or ""

    async def body(svc: Any) -> None:
        job_id, lease = await _running(svc)
        params = {"job_id": job_id, "token": lease.token, **_wait_row()}
        opening = [("lock_event_wait", {"wait_key": ROUTE}), ("open_event_wait", params)]
        send = lambda: svc.store.events.send(_event("second"), 10)  # noqa: E731
        event_id, _, rows = await _held_then(url, opening, send)
        assert [(str(r["id"]), r["resolved"]) for r in rows] == [(job_id, True)]
        [step] = await svc.store.steps.load(job_id, 0, 10)
        assert step["result"] == {"event": event_id, "payload": "second"}

    _run(settings, body)


def test_a_wait_looks_back_only_at_events_since_its_jobs_submit_and_from_its_senders(
    settings: Settings,
) -> None:
    async def body(svc: Any) -> None:
        await svc.store.events.send(_event("before the submit"), 10)
        job_id, lease = await _running(svc)
        await svc.store.events.send(_event("from a stranger", sender="dev"), 10)
        await svc.store.events.send(_event("from ops"), 10)
        guarded = _wait_row(terms={"from": ["ops"]})
        found = await svc.store.steps.open_wait(job_id, lease.token, guarded)
        assert found["result"]["payload"] == "from ops"
        found = await svc.store.steps.open_wait(job_id, lease.token, _wait_row(2))
        assert found["status"] == "waiting"  # "from ops" was taken; the stranger's is older

    _run(settings, body)


def test_a_delivery_in_pages_wakes_every_waiting_job_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("asyncz.service.events.RESOLVE_PAGE", 3)
    monkeypatch.setattr("asyncz.service.waits.RESOLVE_PAGE", 3)

    async def body(svc: Any) -> None:
        jobs = []
        for _ in range(8):
            job_id, lease = await _running(svc)
            await svc.store.steps.open_wait(job_id, lease.token, _wait_row())
            await svc.store.steps.suspend(lease, 3600.0, "event")
            jobs.append(job_id)
        sent = await svc.events.send("approval", "order:1", {"n": 1}, sender="ops")
        assert sent.woken == 8
        assert await svc.events.send("approval", "order:1", {"n": 2}) == type(sent)(
            sent.event_id + 1, 0)  # fmt: skip
        assert len(await svc.store.claim(jobs, "w", 3600)) == 8  # every one due now

    _run(settings, body)


def test_retention_deletes_old_events_a_page_at_a_time(settings: Settings) -> None:
    url = settings.database_url or ""

    async def body(svc: Any) -> None:
        for n in range(5):
            await svc.store.events.send(_event(n), 10)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE events SET created_at = now() - interval '2 days' "
                         "WHERE payload::text IN ('0', '1', '2')")  # fmt: skip
        assert await svc.store.events.prune(86_400, 2) == 2
        assert await svc.store.events.prune(86_400, 2) == 1
        assert await svc.store.events.prune(86_400, 2) == 0
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE events SET created_at = now() - interval '2 days'")
        # the recovery sweep's retention: pages of one, until none is left
        svc.retention.settings = svc.settings.model_copy(
            update={"retain_events_seconds": 86_400, "recovery_batch_size": 1})  # fmt: skip
        await svc.prune()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)

    _run(settings, body)


def test_a_delivery_whose_caller_died_between_two_pages_is_finished_by_recovery(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = settings.database_url or ""
    monkeypatch.setattr("asyncz.service.events.RESOLVE_PAGE", 3)
    monkeypatch.setattr("asyncz.service.waits.RESOLVE_PAGE", 3)

    def crash(point: str) -> None:
        if point == "events.between_pages":
            raise SystemExit("the api died here")

    monkeypatch.setattr("asyncz.service.events.crash_point", crash)

    async def body(svc: Any) -> None:
        jobs = []
        for _ in range(7):
            job_id, lease = await _running(svc)
            await svc.store.steps.open_wait(job_id, lease.token, _wait_row())
            await svc.store.steps.suspend(lease, 3600.0, "event")
            jobs.append(job_id)
        with pytest.raises(SystemExit):
            await svc.events.send("approval", "order:1", "all of you", sender="ops")
        assert len(await svc.store.claim(jobs, "w", 3600)) == 3  # the first page only
        report = await svc.recover()  # not yet: a delivery may still be under way
        assert not report.failed
        assert len(await svc.store.claim(jobs, "w", 3600)) == 0
        monkeypatch.setattr("asyncz.service.events.PENDING_SECONDS", 0.0)
        report = await svc.recover()
        assert not report.failed
        assert len(await svc.store.claim(jobs, "w", 3600)) == 4  # the rest, each once
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT pending FROM events").fetchone() == (False,)
            taken = conn.execute("SELECT count(*) FROM job_steps WHERE status = 'completed' "
                                 "AND result ->> 'payload' = 'all of you'").fetchone()  # fmt: skip
        assert taken == (7,)

    _run(settings, body)


def test_a_waits_look_back_reads_no_event_sent_before_its_jobs_submit(settings: Settings) -> None:
    url = settings.database_url or ""
    with psycopg.connect(url, autocommit=True) as conn:  # a busy key's history, and others'
        for key, n in ((ROUTE, 5000), (None, 5000)):
            conn.execute(
                "INSERT INTO events (name, key, wait_key, payload, created_at) "
                "SELECT 'approval', 'k', coalesce(%s, n::text), '1', "
                "       now() - interval '1 day' + n * interval '1 ms' "
                "  FROM generate_series(1, %s) n", (key, n))  # fmt: skip
        conn.execute("ANALYZE events")

    async def body(svc: Any) -> None:
        job_id, lease = await _running(svc)
        params = {"job_id": job_id, "token": lease.token, **_wait_row()}
        with psycopg.connect(url) as conn:
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) " + QUERIES["open_event_wait"], params))  # fmt: skip
        scan = plan[plan.index("on events e") :]
        assert "Index Cond:" in scan and "created_at >= $" in scan, plan
        assert "Rows Removed" not in scan, plan  # nothing older than the submit was read

    _run(settings, body)


def test_a_job_waiting_twice_on_one_name_and_key_takes_one_event_per_wait_in_order(
    settings: Settings,
) -> None:
    async def body(svc: Any) -> None:
        job_id, lease = await _running(svc)
        for payload in ("first", "second"):  # sent before the waits began
            await svc.store.events.send(_event(payload), 10)
        taken = [await svc.store.steps.open_wait(job_id, lease.token, _wait_row(seq))
                 for seq in (1, 2, 3)]  # fmt: skip
        assert [t["status"] for t in taken] == ["completed", "completed", "waiting"]
        assert [t["result"]["payload"] for t in taken[:2]] == ["first", "second"]
        _, _, rows = await svc.store.events.send(_event("third"), 10)
        assert [r["resolved"] for r in rows] == [True]
        steps = await svc.store.steps.load(job_id, 0, 10)
        assert [s["result"]["payload"] for s in steps] == ["first", "second", "third"]

    _run(settings, body)
