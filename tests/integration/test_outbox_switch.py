"""The outbox's switch (``set_outbox``, run by the migrate function as ``ASYNCZ_OUTBOX``
says): with the triggers off no end of a job writes a row; on again, the next end writes
its own; a switch that changes nothing alters nothing and waits on no lock.

On a database of this module's own: the shared test database keeps its outbox on, whatever
happens here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.store.migrations import OUTBOX_TRIGGERS, set_outbox
from tests.support.databases import empty_servers, fresh_database, sibling_url
from tests.support.ledger import rows
from tests.support.settings import make_settings, open_service

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def switch_db() -> str:
    return fresh_database(sibling_url("outbox_switch"), migrate=True)


@pytest.fixture
def switch_settings(switch_db: str, redis_server_url: str, tmp_path: Any) -> Iterator[Settings]:
    """Settings on the module's database, emptied, with its outbox on before and after."""
    empty_servers(switch_db, redis_server_url)
    set_outbox(switch_db, on=True)
    yield make_settings(switch_db, redis_server_url, artifact_dir=str(tmp_path / "artifacts"))
    set_outbox(switch_db, on=True)


def _outbox(url: str) -> list[tuple[str, str]]:
    return [(r["type"], str(r["job_id"])) for r in rows(
        url, "SELECT type, job_id FROM job_outbox ORDER BY created_at")]  # fmt: skip


def _enabled(url: str) -> dict[str, str]:
    return {r["tgname"]: r["tgenabled"] for r in rows(
        url, "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'jobs'::regclass"
             " AND tgname = ANY(%s)", (list(OUTBOX_TRIGGERS),))}  # fmt: skip


async def _end_three(settings: Settings) -> list[str]:
    """A job completed, one dead (out of tries) and one cancelled (while queued)."""
    async with open_service(settings) as svc:
        done = await svc.submit(NewJob(task="echo", payload={}))
        failing = await svc.submit(NewJob(task="fail", payload={}, max_retries=0))
        leases = {lease.job_id: lease for lease in await svc.claim_next(
            "w-1", ["default"], 2, 2.0, 3600)}  # fmt: skip
        assert await svc.complete(leases[done.job_id], {"ok": True})
        dead = await svc.fail(leases[failing.job_id], "boom")
        assert dead is not None and dead.status is JobStatus.DEAD
        queued = await svc.submit(NewJob(task="echo", payload={}))
        assert await svc.cancel(queued.job_id) is JobStatus.CANCELLED
        return [done.job_id, failing.job_id, queued.job_id]


async def _complete_one(settings: Settings) -> str:
    async with open_service(settings) as svc:
        sub = await svc.submit(NewJob(task="echo", payload={}))
        # the cancelled job's id may still be ahead of it in Redis (an id there is a hint)
        [lease] = await svc.claim_next("w-1", ["default"], 5, 2.0, 3600)
        assert await svc.complete(lease, None)
        return sub.job_id


def test_with_the_outbox_off_no_end_writes_a_row_and_on_again_the_next_end_does(
    switch_settings: Settings,
) -> None:
    url = switch_settings.database_url or ""
    assert set_outbox(url, on=False) is True
    ended = asyncio.run(_end_three(switch_settings))
    statuses = {str(r["id"]): r["status"] for r in rows(url, "SELECT id, status FROM jobs")}
    assert [statuses[job_id] for job_id in ended] == ["completed", "dead", "cancelled"]
    assert _outbox(url) == []

    assert set_outbox(url, on=True) is True
    job_id = asyncio.run(_complete_one(switch_settings))
    assert _outbox(url) == [("asyncz.job.completed", job_id)]


def test_switching_to_the_state_it_is_in_changes_nothing(switch_settings: Settings) -> None:
    url = switch_settings.database_url or ""
    assert set_outbox(url, on=True) is False  # migrated: on
    assert set(_enabled(url).values()) == {"O"}
    assert set_outbox(url, on=False) is True
    assert set_outbox(url, on=False) is False
    assert _enabled(url) == dict.fromkeys(OUTBOX_TRIGGERS, "D")
    assert set_outbox(url, on=True) is True
    assert set_outbox(url, on=True) is False
    assert _enabled(url) == dict.fromkeys(OUTBOX_TRIGGERS, "O")


@pytest.mark.parametrize("on", [True, False])
def test_a_switch_that_changes_nothing_waits_on_no_lock(
    switch_settings: Settings, on: bool
) -> None:
    url = switch_settings.database_url or ""
    set_outbox(url, on=on)
    impatient = psycopg.conninfo.make_conninfo(url, options="-c lock_timeout=1s")
    with psycopg.connect(url) as writer:  # a transaction that is writing jobs, not committed
        writer.execute("LOCK TABLE jobs IN ROW EXCLUSIVE MODE")
        assert set_outbox(impatient, on=on) is False
        with pytest.raises(psycopg.errors.LockNotAvailable):  # a real switch would wait
            set_outbox(impatient, on=not on)
        writer.rollback()
