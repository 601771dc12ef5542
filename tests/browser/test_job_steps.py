"""A durable job's page in a real browser against ``asyncz dev``: its stored steps under its
attempts, and a dead one replayed with its steps reset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import PageWatch, csp_violations, sign_in
from tests.support.devrun import DevRun

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

Page = tuple[Any, PageWatch]


def test_a_durable_jobs_page_shows_its_steps_and_replays_them_reset(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    retried = dev.submit({"task": "flaky_steps", "payload": {"steps": 3, "fail_at": 1},
                          "max_retries": 1})  # fmt: skip
    dead = dev.submit({"task": "flaky_steps", "payload": {"steps": 3, "fail_at": 2},
                       "max_retries": 0})  # fmt: skip
    dev.wait_status(retried, {"completed"})
    dev.wait_status(dead, {"dead"})
    sign_in(pg, dev)
    pg.goto(f"{dev.url}/ui#/jobs/{retried}")
    pg.wait_for_selector("#steps li")
    items = pg.locator("#steps li")
    assert items.count() == 3
    assert "step:1" in items.nth(1).inner_text() and "2 run(s)" in items.nth(1).inner_text()
    assert "1 run(s)" in items.nth(0).inner_text()
    assert pg.get_by_role("button", name="Replay, steps reset").count() == 0  # not dead
    pg.screenshot(path=str(output_dir / "job-steps.png"), full_page=True)

    pg.goto(f"{dev.url}/ui#/jobs/{dead}")
    pg.wait_for_selector("#steps li.outcome-failed")
    pg.get_by_role("button", name="Replay, steps reset").click()
    again = dev.wait_job(dead, lambda j: j["attempts"] >= 2 and j["status"] != "queued")
    assert dev.wait_status(dead, {"completed"})["attempts"] == 2, again
    _, steps = dev.call("GET", f"/jobs/{dead}/steps")
    # reset: the steps ran again from the start, by the second attempt
    assert [(s["name"], s["job_attempt"]) for s in steps["items"]] == [
        ("step:0", 2), ("step:1", 2), ("step:2", 2)]  # fmt: skip
    assert csp_violations(watch) == []


def test_a_sleeping_job_shows_suspended_is_filtered_by_it_and_is_cancelled_at_once(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    asleep = dev.submit({"task": "flaky_steps", "payload": {"steps": 2, "sleep": 3600}})
    dev.wait_status(asleep, {"suspended"})
    sign_in(pg, dev)
    pg.click("#nav a[data-page=jobs]")
    # the page builds its filter form after the click returns (the select with its options)
    pg.wait_for_selector("form.filters select[name=status]", state="attached")
    options = pg.locator("form.filters select[name=status] option").all_inner_texts()
    assert "suspended" in options
    pg.select_option("form.filters select[name=status]", "suspended")
    pg.click("form.filters button[type=submit]")
    pg.wait_for_selector(f"tr[data-job='{asleep}'] .status-suspended")
    assert set(pg.locator("#list tbody tr[data-job] .status").all_inner_texts()) == {"suspended"}

    pg.goto(f"{dev.url}/ui#/jobs/{asleep}")
    pg.wait_for_selector("h1 .status-suspended")
    fields = pg.inner_text("dl.fields")
    assert "waiting for" in fields and "sleep 'nap' until" in fields
    pg.screenshot(path=str(output_dir / "job-suspended.png"), full_page=True)
    pg.get_by_role("button", name="Cancel").click()
    pg.wait_for_selector("h1 .status-cancelled")
    assert dev.wait_status(asleep, {"cancelled"})["attempts"] == 1
    assert csp_violations(watch) == []
