"""The dashboard's Webhooks page in a real browser against ``asyncz dev``: it lists a
registered webhook (a receiver on this machine, which ``asyncz dev`` allows), and a test
event sent from the page shows among the webhook's deliveries, as the API lists them, until
``asyncz dev``'s events function has delivered it to the receiver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import PageWatch, csp_violations, sign_in
from tests.support.devrun import DevRun
from tests.support.webhook_receiver import receiver

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def test_the_webhooks_page_lists_a_webhook_and_the_test_event_it_sends(
    dev: DevRun, page: tuple[Any, PageWatch], output_dir: Path
) -> None:
    pg, watch = page
    with receiver() as hook:
        status, created = dev.call(
            "POST", "/webhooks", {"url": hook.url, "types": ["asyncz.job.dead"]}
        )
        assert status == 201, created
        webhook = created["id"]
        sign_in(pg, dev)
        pg.click("#nav a[data-page=webhooks]")
        row = pg.locator(f"#webhooks tr[data-webhook='{webhook}']")
        row.wait_for()
        assert hook.url in row.inner_text() and "asyncz.job.dead" in row.inner_text()
        row.locator("a").click()  # its deliveries
        row.locator("button.send-test").click()
        shown = pg.locator("#deliveries tr[data-delivery]")
        shown.wait_for()  # the page refreshes after the action
        status, page_of = dev.call("GET", f"/webhooks/{webhook}/deliveries")
        [delivery] = page_of["items"]
        assert shown.get_attribute("data-event") == delivery["event_id"]
        # asyncz dev's events function sends it (loopback allowed), and the page shows it
        [received] = hook.wait_for(1, timeout=90)
        assert received.headers["AsyncZ-Event-Id"] == delivery["event_id"]
        pg.wait_for_selector(
            f"#deliveries tr[data-event='{delivery['event_id']}'] td.status:text('delivered')"
        )
        assert "asyncz.webhook.test" in shown.inner_text()
        assert pg.locator("#nav a[data-page=webhooks]").get_attribute("class") == "active"
        pg.screenshot(path=str(output_dir / "webhooks.png"), full_page=True)
    assert csp_violations(watch) == [] and watch.dialogs == [] and watch.errors == []
