"""The dashboard's Tasks page in a real browser against ``asyncz dev``: every registered
task with its defaults, and a task's payload and result schemas opened from its row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import PageWatch, csp_violations, sign_in
from tests.support.devrun import DevRun

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_the_tasks_page_lists_each_task_and_shows_its_schemas(
    dev: DevRun, page: tuple[Any, PageWatch], output_dir: Path
) -> None:
    pg, watch = page
    sign_in(pg, dev)
    pg.click("#nav a[data-page=tasks]")
    pg.wait_for_selector("#tasks tr[data-task=sleep]")
    status, listed = dev.call("GET", "/tasks")
    assert status == 200
    rows = pg.locator("#tasks tbody tr")
    assert rows.count() == len(listed["items"])
    sleep = pg.locator("#tasks tr[data-task=sleep]").inner_text()
    assert "yes" in sleep and "Sleeps" in sleep  # typed, and its docstring's first line
    echo = pg.locator("#tasks tr[data-task=echo]").inner_text()
    assert "\tno\t" in echo and "30 s" in echo
    assert not pg.locator("#task-sleep").evaluate("d => d.open")
    pg.click("#tasks tr[data-task=sleep] a")
    assert pg.locator("#task-sleep").evaluate("d => d.open")
    shown = json.loads(pg.locator("#task-sleep .payload-schema").inner_text())
    assert shown["properties"]["seconds"]["type"] == "number"
    result = json.loads(pg.locator("#task-sleep .result-schema").inner_text())
    assert result["required"] == ["slept", "interrupted"]
    assert pg.locator("#nav a[data-page=tasks]").get_attribute("class") == "active"
    pg.screenshot(path=str(output_dir / "tasks.png"), full_page=True)
    assert csp_violations(watch) == [] and watch.dialogs == []
