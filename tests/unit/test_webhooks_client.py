"""Webhooks from the Python clients and the CLI (against a stand-in API): the requests each
makes, the secret shown once, and what ``asyncz webhooks`` prints."""

from __future__ import annotations

import asyncio
import json

import pytest

from asyncz import cli
from asyncz.client import AsyncClient, Client, Webhook
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit

HOOK = {"id": 3, "url": "https://hooks.example.com/in", "types": ["asyncz.job.dead"],
        "queues": [], "tasks": [], "created_by": "ops", "created_at": "2026-12-06T14:00:00Z",
        "rotated_at": None, "previous_secret_until": None}  # fmt: skip
DELIVERY = {"id": 9, "event_id": "e-1", "event_type": "asyncz.job.dead", "status": "failed",
            "attempts": 3, "redelivery_of": None, "last_status_code": 500,
            "last_error": "HTTP 500", "created_at": "2026-12-06T14:00:00Z",
            "attempt_log": [{"attempt": 1, "status_code": 500}]}  # fmt: skip
QUEUED = {"id": 10, "webhook_id": 3, "event_id": "e-1", "status": "pending"}


def routes(api: FakeApi) -> None:
    api.routes[("POST", "/webhooks")] = (201, {**HOOK, "secret": "whsec_x"})
    api.routes[("GET", "/webhooks")] = (200, {"items": [HOOK]})
    api.routes[("DELETE", "/webhooks/3")] = (204, None)
    api.routes[("POST", "/webhooks/3/rotate")] = (200, {**HOOK, "secret": "whsec_y"})
    api.routes[("GET", "/webhooks/3/deliveries")] = (
        200,
        {"items": [DELIVERY], "next_cursor": None},
    )
    api.routes[("POST", "/webhooks/3/deliveries/9/redeliver")] = (202, QUEUED)
    api.routes[("POST", "/webhooks/3/test")] = (202, {**QUEUED, "event_id": "t-1"})


def test_both_clients_register_list_rotate_read_redeliver_test_and_remove(api: FakeApi) -> None:
    routes(api)
    with Client(api.url, "k") as client:
        hooks = client.ops.webhooks
        added = hooks.add(HOOK["url"], types=["asyncz.job.dead"])
        assert isinstance(added, Webhook) and added.secret == "whsec_x"
        assert [h.id for h in hooks.list()] == [3] and hooks.list()[0].secret is None
        assert hooks.rotate(3, overlap_seconds=60).secret == "whsec_y"
        [delivery] = hooks.deliveries(3, limit=5)
        assert (delivery.status, delivery.last_error, delivery.attempt_log[0]["status_code"]) == (
            "failed", "HTTP 500", 500)  # fmt: skip
        assert hooks.redeliver(3, 9)["event_id"] == "e-1"
        assert hooks.test(3)["event_id"] == "t-1"
        hooks.remove(3)

    async def use() -> list[int]:
        async with AsyncClient(api.url, "k") as client:
            await client.ops.webhooks.add(HOOK["url"])
            return [h.id for h in await client.ops.webhooks.list()]

    assert asyncio.run(use()) == [3]
    sent = [(r["method"], r["path"], r["body"]) for r in api.requests]
    assert sent[0] == ("POST", "/webhooks", {"url": HOOK["url"], "types": ["asyncz.job.dead"],
                                             "queues": [], "tasks": []})  # fmt: skip
    assert ("POST", "/webhooks/3/rotate", {"overlap_seconds": 60}) in sent
    assert ("DELETE", "/webhooks/3", None) in sent
    assert "limit=5" in next(r["query"] for r in api.requests if r["path"].endswith("deliveries"))


def test_the_cli_manages_webhooks_and_shows_the_secret_once(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    routes(api)
    assert cli.main(["webhooks", "add", HOOK["url"], "--type", "asyncz.job.dead"]) == 0
    out = capsys.readouterr().out
    assert "webhook 3 registered" in out and "whsec_x" in out
    assert api.requests[-1]["body"]["types"] == ["asyncz.job.dead"]
    assert cli.main(["webhooks", "list"]) == 0
    listed = capsys.readouterr().out
    assert HOOK["url"] in listed and "whsec" not in listed
    assert cli.main(["webhooks", "deliveries", "3"]) == 0
    assert "HTTP 500" in capsys.readouterr().out
    assert cli.main(["webhooks", "redeliver", "3", "9"]) == 0
    assert "event e-1 queued again as delivery 10" in capsys.readouterr().out
    assert cli.main(["webhooks", "test", "3"]) == 0
    assert "test event t-1" in capsys.readouterr().out
    assert cli.main(["webhooks", "remove", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": 3}
