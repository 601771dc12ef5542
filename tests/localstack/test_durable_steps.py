"""A durable task through the deployed stack: its steps are stored by a worker Lambda, a
failed step is retried by the job, and the steps before it are not run again."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.support.localstack import Stack

pytestmark = pytest.mark.localstack


def test_a_durable_job_retries_its_failed_step_without_rerunning_the_steps_before_it(
    stack: Stack,
) -> None:
    # flaky_steps, a built-in durable task: step:2 fails the first two attempts.
    job_id = stack.submit("flaky_steps", {"steps": 4, "fail_at": 2, "failures": 2}, max_retries=2)
    job = stack.wait_job_with_fleet(job_id, {"completed", "dead"}, timeout=120)
    assert job["status"] == "completed", job
    assert job["result"] == [0, 1, 2, 3], job
    assert job["attempts"] == 3, job

    resp = stack.http.get(f"/jobs/{job_id}/steps")
    assert resp.status_code == 200, resp.text
    page = resp.json()
    assert page["next_cursor"] is None, page
    # `attempts` counts each step's runs: step:0 and step:1 ran once, in the first attempt,
    # and were replayed from their stored results by the two after it.
    assert [(s["name"], s["status"], s["attempts"], s["job_attempt"]) for s in page["items"]] == [
        ("step:0", "completed", 1, 1),
        ("step:1", "completed", 1, 1),
        ("step:2", "completed", 3, 3),
        ("step:3", "completed", 1, 3),
    ], page
    assert all(s["result_bytes"] == 1 and s["error"] is None for s in page["items"]), page

    attempts = stack.http.get(f"/jobs/{job_id}/attempts").json()["items"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "completed"),
    ], attempts
    assert all("step:2 failed" in a["error"] for a in attempts[:2]), attempts
