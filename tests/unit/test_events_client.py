"""Sending an event from the Python clients and the CLI (against a stand-in API): the body
POST /events takes, sent once (a 502 that may hide a delivery is not sent again), and what
the CLI prints."""

from __future__ import annotations

import asyncio
import json

import pytest

from asyncz import cli
from asyncz.client import AsyncClient, Client, SentEvent
from asyncz.client.errors import ApiError
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit


def test_both_clients_send_an_event_once(api: FakeApi) -> None:
    api.routes[("POST", "/events")] = (202, {"event_id": 7, "woken": 1})
    with Client(api.url, "k") as client:
        assert client.send_event("approval", "order:1", {"by": "alice"}) == SentEvent(7, 1)
        client.send_event("approval", "order:1")  # no payload: the API's default, {}

    async def send() -> SentEvent:
        async with AsyncClient(api.url, "k") as client:
            return await client.send_event("approval", "order:2", [1])

    assert asyncio.run(send()) == SentEvent(7, 1)
    assert [r["body"] for r in api.requests] == [
        {"name": "approval", "key": "order:1", "payload": {"by": "alice"}},
        {"name": "approval", "key": "order:1"},
        {"name": "approval", "key": "order:2", "payload": [1]},
    ]
    api.requests.clear()
    api.routes[("POST", "/events")] = (502, {"message": "bad gateway"})
    with Client(api.url, "k") as client, pytest.raises(ApiError):
        client.send_event("approval", "order:1", "x")
    assert len(api.requests) == 1  # it may have been delivered: never sent twice


def test_the_cli_sends_an_event_and_says_how_many_waits_it_woke(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("POST", "/events")] = (202, {"event_id": 3, "woken": 2})
    assert cli.main(["event", "send", "approval", "--key", "order:1",
                     "--payload", '{"by": "alice"}']) == 0  # fmt: skip
    assert "event 3 sent: it woke 2 waits" in capsys.readouterr().out
    assert api.requests[-1]["body"] == {"name": "approval", "key": "order:1",
                                        "payload": {"by": "alice"}}  # fmt: skip
    assert cli.main(["event", "send", "approval", "--key", "order:1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"event_id": 3, "woken": 2}
    assert cli.main(["event", "send", "approval", "--key", "k", "--payload", "{bad"]) == 2
    assert "--payload is not JSON" in capsys.readouterr().err
