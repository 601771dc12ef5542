"""The dashboard's Workers page in a real browser against ``asyncz dev``: while four
``sleep`` jobs run it lists them with their elapsed time, and refreshes it; and the Tasks
page shows each task's figures over the last hour."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import PageWatch, csp_violations, sign_in
from tests.support.devrun import DevRun

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_the_workers_page_lists_the_running_jobs_with_their_elapsed_time(
    dev: DevRun, page: tuple[Any, PageWatch], output_dir: Path
) -> None:
    pg, watch = page
    sleepers = [dev.submit({"task": "sleep", "payload": {"seconds": 20}}) for _ in range(4)]
    sign_in(pg, dev)
    pg.click("#nav a[data-page=workers]")
    for job_id in sleepers:  # the page refreshes until each one runs
        pg.wait_for_selector(f"#running tr[data-job='{job_id}']")
    rows = {job_id: pg.locator(f"#running tr[data-job='{job_id}']") for job_id in sleepers}
    for row in rows.values():
        text = row.inner_text()
        assert "sleep" in text and re.search(r"\d+ s", text), text
    assert pg.locator("#workers tbody tr[data-worker]").count() >= 1
    first = rows[sleepers[0]].locator(".elapsed")
    before = first.inner_text()
    pg.wait_for_function(  # the next refresh shows a later elapsed time
        "([sel, was]) => { const c = document.querySelector(sel);"
        " return c && c.textContent !== was; }",
        arg=[f"#running tr[data-job='{sleepers[0]}'] .elapsed", before],
    )
    assert pg.locator("#nav a[data-page=workers]").get_attribute("class") == "active"
    pg.screenshot(path=str(output_dir / "workers.png"), full_page=True)
    for job_id in sleepers:
        assert dev.call("POST", f"/jobs/{job_id}/cancel")[0] == 200
    assert csp_violations(watch) == [] and watch.dialogs == [] and watch.errors == []


def test_the_tasks_page_shows_each_tasks_figures_of_the_last_hour(
    dev: DevRun, page: tuple[Any, PageWatch], output_dir: Path
) -> None:
    pg, watch = page
    for job_id in [dev.submit({"task": "echo", "payload": {"n": n}}) for n in range(3)]:
        dev.wait_status(job_id, {"completed"})
    status, figures = dev.call("GET", "/stats/tasks")
    assert status == 200
    echo = next(f for f in figures["items"] if f["task"] == "echo")
    sign_in(pg, dev)
    pg.click("#nav a[data-page=tasks]")
    row = pg.locator("#task-figures tr[data-task=echo]")
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == ["echo", "default"]
    assert int(cells[2]) >= echo["runs"] >= 3 and cells[6].endswith(" ms")
    pg.screenshot(path=str(output_dir / "task-figures.png"), full_page=True)
    assert csp_violations(watch) == [] and watch.dialogs == []
