"""The store and broker contract for named API keys, the audit trail, who submitted a job
and per-key request rates: run with the rest of the contract (tests/support/contract.py)
against the in-memory adapters and PostgreSQL + Redis."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncz.errors import KeyNameTakenError
from tests.support.contract import Ports, insert, new, scenario


def test_keys_are_created_listed_and_revoked_by_name(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        keys = store.access
        made = await keys.create_key(
            name="billing-svc", key_hash="a" * 64, scopes=["submit"], rate=(5, 1), expires_at=None
        )
        assert (made["name"], made["scopes"], made["rate_limit"]) == ("billing-svc", ["submit"], 5)
        assert "key_hash" not in made
        with pytest.raises(KeyNameTakenError):
            await keys.create_key(
                name="billing-svc", key_hash="b" * 64, scopes=["read"], rate=None, expires_at=None
            )
        past = datetime.now(UTC) - timedelta(seconds=1)
        await keys.create_key(
            name="old", key_hash="c" * 64, scopes=["read"], rate=None, expires_at=past
        )
        live = {k["name"]: k for k in await keys.live_keys()}
        assert set(live) == {"billing-svc"} and live["billing-svc"]["key_hash"] == "a" * 64
        await keys.touch_keys(["a" * 64])
        listed = await keys.list_keys(revoked=False)
        assert [k["name"] for k in listed] == ["billing-svc", "old"]
        assert listed[0]["last_used_at"] is not None and all("key_hash" not in k for k in listed)
        assert (await keys.revoke_key("billing-svc"))["name"] == "billing-svc"
        assert await keys.revoke_key("billing-svc") is None  # already revoked
        assert await keys.live_keys() == []
        # the name is free again for its replacement, which is another key (another id)
        again = await keys.create_key(
            name="billing-svc", key_hash="d" * 64, scopes=["submit"], rate=None, expires_at=None
        )
        assert again["key_id"] != made["key_id"]
        assert [k["key_id"] for k in await keys.live_keys()] == [again["key_id"]]
        assert len({k["key_id"] for k in await keys.list_keys(revoked=True)}) == 3

    scenario(ports, body)


def test_the_audit_trail_lists_newest_first_with_filters_and_prunes(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        audit = store.access
        for n in range(3):
            await audit.insert_audit(
                key_id=f"key-{min(n, 1)}", key_name="ops" if n < 2 else "other",
                action="purge", target=f"job-{n}", detail={"n": n}, outcome="ok",
            )  # fmt: skip
        rows = await audit.list_audit(key_name="ops", action=None, limit=10, after=None)
        assert [r["target"] for r in rows] == ["job-1", "job-0"] and rows[0]["detail"] == {"n": 1}
        # one name, two keys: the id tells them apart
        by_id = await audit.list_audit(key_name=None, action=None, limit=10, after=None,
                                       key_id="key-1")  # fmt: skip
        assert [(r["key_id"], r["key_name"], r["target"]) for r in by_id] == [
            ("key-1", "other", "job-2"), ("key-1", "ops", "job-1")
        ]  # fmt: skip
        page = await audit.list_audit(key_name=None, action="purge", limit=1, after=None)
        rest = await audit.list_audit(
            key_name=None, action=None, limit=10, after=(page[0]["at"], page[0]["id"])
        )
        assert [r["target"] for r in page + rest] == ["job-2", "job-1", "job-0"]
        pending = await audit.insert_audit(
            key_id="key-0", key_name="ops", action="replay", target=None, detail={"queue": "q"},
            outcome="pending",
        )  # fmt: skip
        await audit.finish_audit(pending["id"], "ok", {"count": 3})
        done = await audit.list_audit(key_name=None, action="replay", limit=1, after=None)
        assert (done[0]["outcome"], done[0]["detail"]) == ("ok", {"queue": "q", "count": 3})
        assert await audit.prune_audit(3600, 10) == 0
        assert await audit.prune_audit(0, 2) == 2
        assert len(await audit.list_audit(key_name=None, action=None, limit=10, after=None)) == 2

    scenario(ports, body)


def test_a_job_records_who_submitted_it_and_lists_by_it(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        old = await insert(store, submitted_by="billing-svc", submitted_by_key_id="key-1")
        mine = await insert(store, submitted_by="billing-svc", submitted_by_key_id="key-2")
        await insert(store, submitted_by="other", submitted_by_key_id="key-3")
        await insert(store)
        got = await store.get_job(mine)
        assert (got.submitted_by, got.submitted_by_key_id) == ("billing-svc", "key-2")
        listed = await store.list_jobs(
            status=None, queue=None, task=None, limit=10, after=None, submitted_by="billing-svc"
        )
        assert [j.id for j in listed] == [mine, old]  # the name: every key that held it
        listed = await store.list_jobs(
            status=None, queue=None, task=None, limit=10, after=None, submitted_by_key_id="key-2"
        )
        assert [j.id for j in listed] == [mine]  # the id: that key alone
        batch = [
            (str(uuid.uuid4()), new(submitted_by="batcher", submitted_by_key_id="key-4"))
            for _ in range(2)
        ]
        await store.insert_jobs(batch)
        jobs = [await store.get_job(i) for i, _ in batch]
        assert {(j.submitted_by, j.submitted_by_key_id) for j in jobs} == {("batcher", "key-4")}

    scenario(ports, body)


def test_a_keys_request_rate_holds_in_a_sliding_window(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        name = f"k-{uuid.uuid4().hex[:8]}"
        admitted = [await broker.take_request(name, 5, 60) for _ in range(5)]
        assert admitted == [0.0] * 5
        wait = await broker.take_request(name, 5, 60)
        assert 0 < wait <= 60
        assert await broker.take_request(f"{name}-other", 5, 60) == 0.0  # per key

    scenario(ports, body)


def test_one_live_key_is_found_by_its_digest(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        keys = store.access
        await keys.create_key(
            name="n", key_hash="e" * 64, scopes=["read"], rate=None, expires_at=None
        )
        assert (await keys.find_key("e" * 64))["name"] == "n"
        assert await keys.find_key("f" * 64) is None
        await keys.revoke_key("n")
        assert await keys.find_key("e" * 64) is None

    scenario(ports, body)
