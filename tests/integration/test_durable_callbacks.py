"""Durable tasks' callbacks through the api handler, on PostgreSQL and Redis, with a worker
loop running the task: a posted result resumes the job; the same token again answers 409
and changes nothing; a forged token answers 404; a malformed body 422; a heartbeat moves
the deadline; the routes take no API key."""

from __future__ import annotations

from typing import Any

import pytest

from asyncz.settings import Settings
from asyncz.tasks import TaskContext, task
from tests.support.api_lambda import drain, job_row

pytestmark = pytest.mark.integration

VENDOR: list[str] = []  # the tokens the tasks hand out, as a vendor would receive them


@task("ship_by_callback", durable=True)
def _ship(payload: dict[str, Any], ctx: TaskContext) -> Any:
    cb = ctx.callback("shipped", timeout=payload.get("timeout", 3600))
    ctx.step("ask vendor", VENDOR.append, cb.token)
    return {"shipped": cb.wait()}


def _submitted(api: Any, settings: Settings, payload: dict[str, Any]) -> tuple[str, str]:
    """A job of the task, run until it waits: its id and its callback's token."""
    VENDOR.clear()
    reply = api("POST", "/jobs", body={"task": "ship_by_callback", "payload": payload})
    assert reply.status == 202, reply.body
    job_id = reply.json()["job_id"]
    drain(settings, lambda: job_row(settings, job_id)["status"] == "suspended")
    [token] = VENDOR
    return job_id, token


def test_a_posted_result_resumes_the_job_once_and_a_used_or_forged_token_is_refused(
    api: Any, api_settings: Settings
) -> None:
    job_id, token = _submitted(api, api_settings, {})
    waiting = api("GET", f"/jobs/{job_id}").json()
    assert waiting["waiting_for"].startswith("callback 'shipped' until ")
    steps = api("GET", f"/jobs/{job_id}/steps").json()["items"]
    assert [(s["name"], s["kind"], s["status"]) for s in steps] == [
        ("shipped", "callback", "waiting"), ("ask vendor", "step", "completed")]  # fmt: skip
    bad = api("POST", f"/callbacks/{token}", key=None, body={"result": 1, "error": "x"})
    assert (bad.status, bad.json()["error"]) == (422, "validation_error"), bad.body
    reply = api("POST", f"/callbacks/{token}", key=None, body={"result": {"tracking": "T1"}})
    assert (reply.status, reply.json()) == (200, {"job_id": job_id})
    again = api("POST", f"/callbacks/{token}", key=None, body={"result": {"tracking": "T2"}})
    assert (again.status, again.json()["error"]) == (409, "callback_used")
    forged = api("POST", f"/callbacks/cb_{'A' * 43}", key=None, body={"result": 1})
    assert (forged.status, forged.json()["error"]) == (404, "callback_not_found")
    drain(api_settings, lambda: job_row(api_settings, job_id)["status"] == "completed")
    row = job_row(api_settings, job_id)
    assert row["result"] == {"shipped": {"tracking": "T1"}}  # the first post, not the retry
    assert row["attempts"] == 2 and row["suspensions"] == 1


def test_a_heartbeat_moves_the_deadline_and_a_posted_error_ends_the_job_dead(
    api: Any, api_settings: Settings
) -> None:
    job_id, token = _submitted(api, api_settings, {"timeout": 60})
    first = api("POST", f"/callbacks/{token}/heartbeat", key=None)
    assert first.status == 200, first.body
    later = api("POST", f"/callbacks/{token}/heartbeat", key=None).json()["timeout_at"]
    assert later >= first.json()["timeout_at"]
    failed = api("POST", f"/callbacks/{token}", key=None, body={"error": "lost in transit"})
    assert failed.status == 200
    used = api("POST", f"/callbacks/{token}/heartbeat", key=None)
    assert (used.status, used.json()["error"]) == (409, "callback_used")
    drain(api_settings, lambda: job_row(api_settings, job_id)["status"] == "dead")
    assert job_row(api_settings, job_id)["last_error"].startswith(
        "callback_failed: callback 'shipped' failed: lost in transit"
    )
