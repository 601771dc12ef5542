"""The events' part of the store contract (see tests/support/contract.py): a new event wait
takes the first stored event it accepts (one per wait, in order), a delivery resolves each
job's earliest wait and marks a full first page pending until it is finished, and retention
prunes events a page at a time. Run against the in-memory store and against PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.durable.events import wait_key
from tests.support.contract import Ports, insert, scenario

ROUTE = wait_key("approval", "order:1")


def event(payload: Any, sender: str | None = "ops") -> dict[str, Any]:
    return {"name": "approval", "key": "order:1", "wait_key": ROUTE,
            "payload": json.dumps(payload), "sent_by": sender, "sent_by_key_id": None}  # fmt: skip


def event_wait(seq: int, senders: list[str] | None = None) -> dict[str, Any]:
    return {"seq": seq, "name": f"event:approval:{seq}", "kind": "event", "after_name": None,
            "job_attempt": 1, "result": json.dumps({"from": senders}) if senders else None,
            "wait_until": datetime.now(UTC) + timedelta(hours=1), "wait_key": ROUTE}  # fmt: skip


def test_a_new_event_wait_takes_the_first_stored_event_it_accepts_one_per_wait(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        for payload, sender in (("a stranger's", "dev"), ("first", "ops"), ("second", "ops")):
            _, _, rows = await store.events.send(event(payload, sender), 10)
            assert rows == []  # nothing waits yet: kept
        found = [await store.steps.open_wait(job_id, lease.token, event_wait(seq, ["ops"]))
                 for seq in (1, 2, 3)]  # fmt: skip
        assert [f["status"] for f in found] == ["completed", "completed", "waiting"]
        assert [f["result"]["payload"] for f in found[:2]] == ["first", "second"]
        assert found[0]["result"]["event"] < found[1]["result"]["event"]

    scenario(ports, body)


def test_a_delivery_marks_a_full_first_page_pending_until_it_is_finished(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        for _ in range(3):
            job_id = await insert(store)
            [lease] = await store.claim([job_id], "w", 3600)
            assert (await store.steps.open_wait(job_id, lease.token, event_wait(1)))["status"] == (
                "waiting")  # fmt: skip
        event_id, value, rows = await store.events.send(event("all"), 2)
        assert [r["resolved"] for r in rows] == [True, True]
        assert json.loads(value) == {"event": event_id, "payload": "all"}
        [pending] = await store.events.pending(-60, 10)
        assert (pending["id"], pending["wait_key"], pending["sent_by"]) == (event_id, ROUTE, "ops")
        assert json.loads(pending["payload"]) == "all"
        assert await store.events.pending(3600, 10) == []  # not that old yet
        await store.events.finish(event_id, 3)
        assert await store.events.pending(-60, 10) == []
        _, _, rows = await store.events.send(event("one page"), 2)
        assert len(rows) == 1 and await store.events.pending(-60, 10) == []

    scenario(ports, body)


def test_retention_prunes_events_a_page_at_a_time(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        for n in range(3):
            await store.events.send(event(n), 10)
        assert await store.events.prune(3600, 10) == 0  # none old enough
        assert await store.events.prune(-60, 2) == 2
        assert await store.events.prune(-60, 2) == 1

    scenario(ports, body)
