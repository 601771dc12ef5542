"""A durable job's steps from the Python clients and the CLI (against a stand-in API): every
page is read, and a replay can reset the steps."""

from __future__ import annotations

import asyncio
import json

import pytest

from asyncz import cli
from asyncz.client import AsyncClient, Client, Step
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit

ID = "5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b"


def _step(seq: int, name: str) -> dict[str, object]:
    return {"seq": seq, "name": name, "kind": "step", "status": "completed", "attempts": 1,
            "job_attempt": 1, "started_at": "2026-12-02T11:59:56.123456Z",
            "finished_at": "2026-12-02T11:59:57Z", "duration_ms": 877, "result_bytes": 12,
            "error": None}  # fmt: skip


def _pages(api: FakeApi) -> None:
    api.routes[("GET", f"/jobs/{ID}/steps")] = [
        (200, {"job_id": ID, "items": [_step(1, "split"), _step(2, "chapter:0")],
               "next_cursor": "2"}),
        (200, {"job_id": ID, "items": [_step(3, "merge")], "next_cursor": None}),
    ]  # fmt: skip


def test_both_clients_read_every_page_of_a_jobs_steps(api: FakeApi) -> None:
    _pages(api)
    with Client(api.url, "k") as client:
        steps = client.steps(ID)
    assert [s.name for s in steps] == ["split", "chapter:0", "merge"]
    assert isinstance(steps[0], Step) and steps[0].started_at.tzinfo is not None
    assert [r["query"] for r in api.requests] == ["limit=500", "limit=500&cursor=2"]
    _pages(api)

    async def read() -> list[Step]:
        async with AsyncClient(api.url, "k") as client:
            return await client.steps(ID)

    assert [s.seq for s in asyncio.run(read())] == [1, 2, 3]


def test_a_replay_resets_the_steps_only_when_asked(api: FakeApi) -> None:
    api.routes[("POST", f"/dlq/{ID}/replay")] = (200, {"job_id": ID, "status": "queued"})
    with Client(api.url, "k") as client:
        client.replay(ID)
        client.replay(ID, reset_steps=True)
    assert [r["body"] for r in api.requests] == [None, {"reset_steps": True}]


def test_the_cli_lists_steps_and_replays_with_them_reset(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    _pages(api)
    assert cli.main(["steps", ID]) == 0
    out = capsys.readouterr().out
    assert "chapter:0" in out and "merge" in out and "RUNS" in out
    _pages(api)
    assert cli.main(["steps", ID, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["items"]] == ["split", "chapter:0", "merge"]
    api.routes[("POST", f"/dlq/{ID}/replay")] = (200, {"job_id": ID, "status": "queued"})
    assert cli.main(["replay", ID, "--reset-steps"]) == 0
    assert api.requests[-1]["body"] == {"reset_steps": True}
    assert cli.main(["replay", "--all", "--reset-steps"]) == 2
