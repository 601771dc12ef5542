"""asyncz.client's unique-job options without a server (httpx MockTransport): the body
fields sent, and a 200 answer read as the holder of the key, on both clients."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from asyncz.client import AsyncClient, Client

pytestmark = pytest.mark.unit


def answering(sent: list[dict[str, Any]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if len(sent) == 1:
            return httpx.Response(202, json={"job_id": "new", "status": "queued"})
        held = {"job_id": "new", "status": "queued", "duplicate": True}
        return httpx.Response(200, json={**held, "debounced": body.get("debounce", False)})

    return httpx.MockTransport(handle)


def test_the_sync_client_sends_the_options_and_reads_a_200_as_the_holder() -> None:
    sent: list[dict[str, Any]] = []
    with Client("http://api.test", "k", transport=answering(sent)) as c:
        first = c.submit("echo", unique_key="k", unique_scope="period", unique_for=60)
        again = c.submit("echo", unique_key="k", debounce=True, delay_seconds=5)
    assert {k: sent[0][k] for k in ("unique_key", "unique_scope", "unique_for")} == {
        "unique_key": "k", "unique_scope": "period", "unique_for": 60}  # fmt: skip
    assert "debounce" not in sent[0] and sent[1]["debounce"] is True
    assert sent[1]["idempotency_key"]  # retries stay safe, unique key or not
    assert (first.id, first.duplicate, first.unique_key) == ("new", False, "k")
    assert (again.id, again.duplicate, again.debounced) == ("new", True, True)


def test_the_async_client_reads_a_200_as_the_holder() -> None:
    sent: list[dict[str, Any]] = []

    async def scenario() -> list[Any]:
        async with AsyncClient("http://api.test", "k", transport=answering(sent)) as c:
            return [await c.submit("echo", unique_key="k") for _ in range(2)]

    first, again = asyncio.run(scenario())
    assert (first.duplicate, again.duplicate, again.debounced, again.id) == (
        False, True, False, "new")  # fmt: skip
    assert "unique_scope" not in sent[0] and "debounce" not in sent[0]


def test_a_submit_without_unique_options_sends_none() -> None:
    sent: list[dict[str, Any]] = []
    with Client("http://api.test", "k", transport=answering(sent)) as c:
        job = c.submit("echo", {"a": 1})
    assert not {"unique_key", "unique_scope", "unique_for", "debounce"} & set(sent[0])
    assert job.unique_key is None and not job.duplicate
