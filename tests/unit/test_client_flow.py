"""Flow control in the client and the CLI: a submit's concurrency key, pause and resume."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from asyncz import cli
from asyncz.client import AsyncClient, Client
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit

ID = "5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b"


def recorder(sent: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path.startswith("/queues/"):
            paused = request.url.path.endswith("/pause")
            return httpx.Response(200, json={"queue": "q1", "paused": paused, "paused_at": None})
        return httpx.Response(202, json={"job_id": ID, "status": "queued"})

    return httpx.MockTransport(handle)


def test_both_clients_send_the_concurrency_key_and_pause_and_resume() -> None:
    sent: list[httpx.Request] = []
    with Client("http://api.test", "k", transport=recorder(sent)) as client:
        job = client.submit("call_llm", {"p": 1}, concurrency_key="tenant:42")
        assert job.id == ID and job.concurrency_key == "tenant:42"
        assert client.ops.pause_queue("q1")["paused"] is True
        assert client.ops.resume_queue("q1")["paused"] is False

    async def aio() -> None:
        async with AsyncClient("http://api.test", "k", transport=recorder(sent)) as client:
            await client.submit("call_llm", concurrency_key="provider-key-1")
            assert (await client.ops.pause_queue("q1"))["paused"] is True

    asyncio.run(aio())
    bodies = [json.loads(r.content) for r in sent if r.url.path == "/jobs"]
    assert [b["concurrency_key"] for b in bodies] == ["tenant:42", "provider-key-1"]
    paths = [r.url.path for r in sent if r.url.path != "/jobs"]
    assert paths == ["/queues/q1/pause", "/queues/q1/resume", "/queues/q1/pause"]


def test_a_submit_without_a_key_sends_none() -> None:
    sent: list[httpx.Request] = []
    with Client("http://api.test", "k", transport=recorder(sent)) as client:
        client.submit("echo")
    assert "concurrency_key" not in json.loads(sent[0].content)


def test_the_cli_submits_with_a_key_and_pauses_and_resumes(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("POST", "/jobs")] = (202, {"job_id": ID, "status": "queued"})
    api.routes[("POST", "/queues/q1/pause")] = (200, {"queue": "q1", "paused": True})
    api.routes[("POST", "/queues/q1/resume")] = (200, {"queue": "q1", "paused": False})
    assert cli.main(["submit", "echo", "--concurrency-key", "tenant:42"]) == 0
    assert api.requests[-1]["body"]["concurrency_key"] == "tenant:42"
    capsys.readouterr()
    assert cli.main(["pause", "q1"]) == 0
    assert capsys.readouterr().out.split() == ["queue", "q1", "paused"]
    assert cli.main(["resume", "q1", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert out == {"queue": "q1", "paused": False}
    assert [r["path"] for r in api.requests[-2:]] == ["/queues/q1/pause", "/queues/q1/resume"]
