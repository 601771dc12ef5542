"""Spawned jobs from the clients and the CLI (against a stand-in API): ``asyncz status``
shows what a gathering job waits for, its spawned jobs and how to list them, and a spawned
job's spawner; ``asyncz list --spawned-by`` and ``client.jobs(spawned_by=)`` list them."""

from __future__ import annotations

import pytest

from asyncz import cli
from asyncz.client import Client
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit

PARENT = "5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b"
CHILD = "0f2f6e34-3c55-5b8e-9d61-5a3c2b1f7e20"


def _job(job_id: str, **kw: object) -> dict[str, object]:
    return {"job_id": job_id, "status": "queued", "task": "render", "queue": "default",
            "attempts": 0, "payload": {}, **kw}  # fmt: skip


def test_status_shows_a_gatherers_progress_and_spawns_and_a_spawned_jobs_spawner(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = "37/100 spawned jobs ended: gather 'pages' of 100 spawned jobs until 2026-12-06"
    spawned = {"total": 100, "by_status": {"completed": 37, "queued": 63}, "capped": False,
               "list": f"/jobs?spawned_by={PARENT}"}  # fmt: skip
    api.routes[("GET", f"/jobs/{PARENT}")] = (200, _job(
        PARENT, status="suspended", task="book", waiting_for=waiting, spawned=spawned))  # fmt: skip
    assert cli.main(["status", PARENT]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "waiting_for 37/100 spawned jobs ended: gather 'pages'" in out
    assert f"100 (37 completed, 63 queued): asyncz list --spawned-by {PARENT}" in out
    api.routes[("GET", f"/jobs/{CHILD}")] = (200, _job(CHILD, spawned_by=PARENT))
    assert cli.main(["status", CHILD]) == 0
    assert f"spawned_by {PARENT}" in " ".join(capsys.readouterr().out.split())


def test_the_jobs_a_job_spawned_are_listed_by_spawned_by(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("GET", "/jobs")] = (200, {"items": [_job(CHILD, spawned_by=PARENT)],
                                          "next_cursor": None})  # fmt: skip
    assert cli.main(["list", "--spawned-by", PARENT]) == 0
    assert CHILD[:8] in capsys.readouterr().out
    assert f"spawned_by={PARENT}" in api.requests[-1]["query"]
    with Client(api.url, api_key="k") as client:
        [job] = list(client.jobs(spawned_by=PARENT))
    assert job.spawned_by == PARENT and f"spawned_by={PARENT}" in api.requests[-1]["query"]
