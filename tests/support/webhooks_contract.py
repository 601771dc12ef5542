"""The webhooks' part of the store contract (see tests/support/contract.py): a page of
events makes one delivery per matching webhook (none twice), a claim takes at most a few of
each webhook and none of a busy one, an attempt's outcome is fenced by its claim and ends
the delivery when its window would pass, and the listing pages newest first. Run against
the in-memory store and against PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.contract import Ports, scenario

SECRET = b"\x01" * 40


def event(kind: str = "asyncz.job.dead", queue: str = "default", task: str = "echo") -> Any:
    event_id = str(uuid.uuid4())
    body = {"specversion": "1.0", "id": event_id, "type": kind, "source": "asyncz",
            "time": "2026-12-06T14:00:00+00:00",
            "data": {"queue": queue, "task": task}}  # fmt: skip
    return {"id": event_id, "type": kind, "queue": queue, "task": task, "body": body}


async def claim(store: Any, **kw: Any) -> list[Any]:
    kw.setdefault("retry_for_seconds", 3600)
    return list(await store.webhooks.claim_due(**kw))


async def hook(store: Any, **filters: Any) -> int:
    row = await store.webhooks.insert(
        url="https://hooks.example.com/x", types=filters.get("types", []),
        queues=filters.get("queues", []), tasks=filters.get("tasks", []), secret=SECRET,
        created_by="ops", created_by_key_id="key-1",
    )  # fmt: skip
    assert "secret" not in row
    return int(row["id"])


def test_a_page_of_events_makes_one_delivery_per_matching_webhook_none_twice(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        every = await hook(store)
        dead_only = await hook(store, types=["asyncz.job.dead"])
        reports = await hook(store, queues=["reports"], tasks=["render"])
        gone = await hook(store)
        assert await store.webhooks.delete(gone) is True
        assert await store.webhooks.delete(gone) is False
        page = [event(), event("asyncz.job.completed"), event(queue="reports", task="render")]
        assert await store.webhooks.add_deliveries(page, 3600) == 3 + 1 + 1 + 1
        assert await store.webhooks.add_deliveries(page, 3600) == 0  # offered again
        assert await store.webhooks.count() == 3
        assert [w["id"] for w in await store.webhooks.live()] == [every, dead_only, reports]
        listed = await store.webhooks.list_deliveries(every, limit=2, before=None)
        assert [d["event_id"] for d in listed] == [page[2]["id"], page[1]["id"]]
        rest = await store.webhooks.list_deliveries(every, limit=2, before=listed[-1]["id"])
        assert [d["event_id"] for d in rest] == [page[0]["id"]]
        [only] = await store.webhooks.list_deliveries(reports, limit=10, before=None)
        assert only["status"] == "pending" and only["attempts"] == 0
        again = await store.webhooks.get_delivery(reports, only["id"])
        assert again["event"]["id"] == page[2]["id"]
        assert await store.webhooks.get_delivery(every, only["id"]) is None

    scenario(ports, body)


def test_a_claim_takes_a_few_of_each_webhook_and_none_of_a_busy_one(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        first, second = await hook(store), await hook(store)
        await store.webhooks.add_deliveries([event() for _ in range(5)], 3600)
        claimed = await claim(store, limit=100, per_endpoint=2, busy=[second], hold_seconds=60)
        assert [c["webhook_id"] for c in claimed] == [first, first]
        assert claimed[0]["secret"] is not None and claimed[0]["previous_secret"] is None
        assert claimed[0]["url"] == "https://hooks.example.com/x" and not claimed[0]["deleted"]
        more = await claim(store, limit=100, per_endpoint=2, busy=[], hold_seconds=60)
        assert sorted(c["webhook_id"] for c in more) == [first, first, second, second]
        assert not {c["id"] for c in more} & {c["id"] for c in claimed}  # a claim holds

    scenario(ports, body)


def test_an_outcome_is_fenced_by_its_claim_and_ends_a_delivery_past_its_window(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        webhook = await hook(store)
        await store.webhooks.add_deliveries([event()], 3600)
        [c] = await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=0)
        outcome = {"ok": False, "final": False, "status_code": 500, "error": "HTTP 500",
                   "duration_ms": 3}  # fmt: skip
        lost = await store.webhooks.finish_attempt(c["id"], uuid.uuid4(), delay_seconds=0,
                                                   **outcome)  # fmt: skip
        assert lost is None  # not the claim's token
        done = await store.webhooks.finish_attempt(c["id"], c["claim_token"], delay_seconds=0,
                                                   **outcome)  # fmt: skip
        assert done == {"status": "pending", "attempt": 1}
        assert await store.webhooks.finish_attempt(
            c["id"], c["claim_token"], delay_seconds=0, **outcome) is None  # fmt: skip
        [c2] = await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60)
        past = await store.webhooks.finish_attempt(c2["id"], c2["claim_token"],
                                                   delay_seconds=7200, **outcome)  # fmt: skip
        assert past == {"status": "failed", "attempt": 2}  # the next try would pass 3600 s
        [row] = await store.webhooks.list_deliveries(webhook, limit=5, before=None)
        assert (row["status"], row["attempts"], row["last_status_code"]) == ("failed", 2, 500)
        assert row["finished_at"] is not None
        attempts = await store.webhooks.list_attempts([row["id"]])
        assert [(a["attempt"], a["status_code"], a["duration_ms"]) for a in attempts] == [
            (1, 500, 3), (2, 500, 3)]  # fmt: skip
        assert await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60) == []
        assert await store.webhooks.prune(3600, 10) == 0  # it ended just now
        assert await store.webhooks.prune(-60, 10) == 1  # (a retention that has passed)
        assert await store.webhooks.list_deliveries(webhook, limit=5, before=None) == []
        assert await store.webhooks.list_attempts([row["id"]]) == []

    scenario(ports, body)


def test_a_rotation_signs_with_both_secrets_for_its_overlap_and_a_redelivery_is_new(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        webhook = await hook(store)
        rotated = await store.webhooks.rotate(webhook, b"\x02" * 40, 3600)
        assert rotated["previous_until"] is not None and "secret" not in rotated
        assert await store.webhooks.rotate(webhook + 99, b"\x03", 10) is None
        first = event()
        await store.webhooks.add_deliveries([first], 3600)
        [c] = await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60)
        assert (bytes(c["secret"]), bytes(c["previous_secret"])) == (b"\x02" * 40, SECRET)
        await store.webhooks.finish_attempt(
            c["id"], c["claim_token"], ok=True, final=False, delay_seconds=1, status_code=200,
            error=None, duration_ms=1,
        )  # fmt: skip
        again = await store.webhooks.add_delivery(webhook, first["body"], 3600,
                                                  redelivery_of=c["id"])  # fmt: skip
        assert again["event_id"] == first["id"] and again["id"] != c["id"]
        await store.webhooks.rotate(webhook, b"\x04" * 40, 0)
        [c2] = await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60)
        assert c2["id"] == again["id"] and c2["previous_secret"] is None  # overlap over
        await store.webhooks.add_delivery(webhook, first["body"], 3600, redelivery_of=c["id"])
        await store.webhooks.delete(webhook)
        assert await store.webhooks.add_delivery(webhook, first["body"], 3600) is None
        # a deleted webhook's pending delivery: claimed (to end it unsent) within the window
        assert await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60,
                           retry_for_seconds=0) == []  # fmt: skip
        [gone] = await claim(store, limit=10, per_endpoint=4, busy=[], hold_seconds=60)
        assert gone["deleted"] is True
        assert len(await store.webhooks.cipher_key()) == 32

    scenario(ports, body)
