"""The dashboard in a real browser against ``asyncz dev``: sign-in, the pages with real data,
replaying a dead job, the XSS payload, a wrong key, the docs. Screenshots of each page are
saved to ``.asyncz/browser-output/``."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import API_KEY, PageWatch, csp_violations, sign_in
from tests.support.devrun import DevRun, request

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

XSS = "<img src=x onerror=alert(1)>"  # shown as text in a payload or an error, or a dialog opens
XSS_FLAG = "<svg onload=window.__xss=1><script>window.__xss=2</script>"  # or a flag be set
Page = tuple[Any, PageWatch]




def test_a_wrong_key_is_refused_and_nothing_is_stored(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    sign_in(pg, dev, "not-the-key")
    pg.wait_for_selector("#signin-error:has-text('refused')")
    assert pg.is_visible("#signin") and not pg.is_visible("#nav")
    assert pg.evaluate("sessionStorage.length") == 0
    pg.screenshot(path=str(output_dir / "signin-refused.png"))
    assert csp_violations(watch) == []


def test_operator_sees_jobs_opens_one_and_the_payload_stays_text(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    for i in range(12):
        dev.submit({"task": "echo", "payload": {"n": i}})
    dev.submit({"task": "flaky", "payload": {"failures": 1}, "max_retries": 2})
    xss_id = dev.submit({"task": "echo", "payload": {"note": XSS, "also": XSS_FLAG}})
    failing = dev.submit({"task": "fail", "payload": {"message": XSS}, "max_retries": 0})
    dev.wait_status(xss_id, {"completed"})
    dev.wait_status(failing, {"dead"})

    sign_in(pg, dev)
    pg.wait_for_selector("#queues tbody tr")
    # the key is in this tab's session storage, nowhere in the URL or a cookie
    assert pg.evaluate("sessionStorage.getItem('asyncz.api-key')") == API_KEY
    assert API_KEY not in pg.url and pg.context.cookies() == []
    # (expect() polls without eval, which the page's CSP forbids)
    expect(pg.locator("[data-stat='completed (1 h)'] .big")).not_to_have_text("0")
    assert pg.locator("svg.chart polyline[data-series=completed]").count() == 1
    # GET /stats' cost estimate for the last hour and day, marked as an estimate
    cost = pg.locator("[data-stat='est. cost (1 h / 1 d)']")
    expect(cost.locator(".big")).to_have_text(re.compile(r"^\$\d+\.\d{2,4} / \$\d+\.\d{2,4}$"))
    assert "estimate at the prices of 20" in (cost.get_attribute("title") or "")
    assert "default" in pg.inner_text("#queues")
    # a queue is paused and resumed from its row; the limits table is there (none limited)
    toggle = pg.locator("#queues button[data-queue=default]")
    expect(toggle).to_have_text("Pause")
    toggle.click()
    expect(toggle).to_have_text("Resume")
    toggle.click()
    expect(toggle).to_have_text("Pause")
    expect(pg.locator("#limits")).to_contain_text("no limited task")
    pg.screenshot(path=str(output_dir / "overview.png"), full_page=True)

    pg.click("#nav a[data-page=jobs]")
    row = pg.locator(f"tr[data-job='{xss_id}']")
    row.wait_for()
    pg.screenshot(path=str(output_dir / "jobs.png"), full_page=True)
    row.locator("a").click()
    pg.wait_for_selector("#payload")
    assert XSS in pg.inner_text("#payload") and XSS_FLAG in pg.inner_text("#payload")
    assert XSS in pg.inner_text("#result")  # echo's result is the payload
    assert (
        pg.locator("main img, main script, #payload svg").count() == 0
    )  # shown as text: no element was made
    assert pg.evaluate("window.__xss") is None and watch.dialogs == []
    pg.screenshot(path=str(output_dir / "job-detail.png"), full_page=True)

    pg.goto(f"{dev.url}/ui#/jobs/{failing}")
    pg.wait_for_selector("#attempts li.outcome-failed")
    assert XSS in pg.inner_text("#last-error") and XSS in pg.inner_text("#attempts")
    assert pg.locator("main img").count() == 0
    assert pg.evaluate("window.__xss") is None and watch.dialogs == []
    assert csp_violations(watch) == []


def test_a_dead_job_is_replayed_from_the_dlq_and_runs_again(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    job_id = dev.submit({"task": "flaky", "payload": {"failures": 1}, "max_retries": 0})
    doomed = dev.submit({"task": "fail", "payload": {}, "max_retries": 0})
    dev.wait_status(job_id, {"dead"})
    dev.wait_status(doomed, {"dead"})
    sign_in(pg, dev)
    pg.click("#nav a[data-page=dlq]")
    row = pg.locator(f"tr[data-job='{job_id}']")
    row.wait_for()
    assert pg.inner_text(".pager").strip() == ""  # one page: no paging buttons (nor "null")
    pg.screenshot(path=str(output_dir / "dlq.png"), full_page=True)
    row.get_by_role("button", name="Replay").click()
    assert dev.wait_status(job_id, {"completed"})["result"] == {"succeeded_on_attempt": 2}
    row.wait_for(state="detached")  # the list refreshed: no longer dead
    purged = pg.locator(f"tr[data-job='{doomed}']")
    purged.get_by_role("button", name="Purge").click()
    purged.wait_for(state="detached")
    assert dev.call("GET", f"/jobs/{doomed}")[0] == 404

    pg.goto(f"{dev.url}/ui#/jobs/{job_id}")
    pg.wait_for_selector("#attempts li.outcome-completed")
    assert pg.locator("#attempts li").count() == 2  # the dead attempt, then the replayed one
    assert "completed" in pg.inner_text("#page h1")
    assert "succeeded_on_attempt" in pg.inner_text("#result")
    assert csp_violations(watch) == []


def test_replay_all_matching_asks_first_and_says_how_many(dev: DevRun, page: Page) -> None:
    pg, _ = page
    ids = [dev.submit({"task": "fail", "queue": "default", "max_retries": 0,
                       "payload": {"batch": "b"}}) for _ in range(3)]  # fmt: skip
    for job_id in ids:
        dev.wait_status(job_id, {"dead"})
    sign_in(pg, dev)
    pg.goto(f"{dev.url}/ui#/dlq?task=fail")
    pg.wait_for_selector(f"tr[data-job='{ids[0]}']")
    dead = dev.call("GET", "/dlq?task=fail&limit=500")[1]["items"]
    pg.get_by_role("button", name="Replay all matching…").click()
    confirm = pg.locator("#confirm")
    confirm.wait_for()
    assert f"Replay {len(dead)} dead jobs matching this filter?" in confirm.inner_text()
    confirm.get_by_role("button", name=f"Replay {len(dead)}").click()
    for job_id in ids:  # `fail` fails again: each ran once more and is dead again
        job = dev.wait_job(job_id, lambda j: j["status"] == "dead" and j["attempts"] >= 2)
        assert job["attempts"] == 2


def test_auto_refresh_keeps_the_filters_and_what_is_being_typed(dev: DevRun, page: Page) -> None:
    pg, _ = page
    dev.submit({"task": "echo", "payload": {}})
    sign_in(pg, dev)
    pg.click("#nav a[data-page=jobs]")
    pg.select_option("form.filters select[name=status]", "completed")
    pg.click("form.filters button[type=submit]")
    pg.wait_for_url(re.compile(r"status=completed"))
    pg.wait_for_selector("#list tbody tr[data-job]")
    pg.fill("form.filters input[name=task]", "half-typ")
    for _ in range(2):  # two refreshes later
        expect(pg.locator("#updated")).not_to_have_text(pg.inner_text("#updated"))
    assert pg.input_value("form.filters input[name=task]") == "half-typ"
    assert pg.input_value("form.filters select[name=status]") == "completed"
    statuses = pg.locator("#list tbody tr[data-job] .status").all_inner_texts()
    assert statuses and set(statuses) == {"completed"}


def test_sign_out_forgets_the_key(dev: DevRun, page: Page) -> None:
    pg, _ = page
    sign_in(pg, dev)
    pg.wait_for_selector("#queues tbody tr")
    pg.click("#signout")
    pg.wait_for_selector("#signin-form")
    assert pg.evaluate("sessionStorage.length") == 0
    pg.reload()
    assert pg.is_visible("#signin") and not pg.is_visible("#nav")


def test_docs_load_with_bundled_assets_and_no_key(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    requested: list[str] = []
    pg.on("request", lambda r: requested.append(r.url))
    pg.goto(dev.url + "/docs")
    pg.wait_for_selector(".swagger-ui .info .title:has-text('AsyncZ')")
    pg.wait_for_selector("text=/jobs")
    assert all(u.startswith(dev.url) for u in requested), requested  # nothing from a CDN
    pg.screenshot(path=str(output_dir / "docs.png"))
    assert csp_violations(watch) == [] and watch.dialogs == []


def test_pages_need_no_key_but_data_does(dev: DevRun) -> None:
    def get(path: str) -> tuple[int, dict[str, str]]:
        try:
            with urllib.request.urlopen(dev.url + path, timeout=30) as resp:
                return resp.status, dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers)

    status, headers = get("/ui")
    assert status == 200 and "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert get("/ui/assets/app.js")[0] == 200 and get("/docs")[0] == 200
    assert get("/jobs")[0] == 401 and get("/stats/series")[0] == 401


def test_a_hidden_tab_asks_nothing_and_failures_slow_the_refresh(dev: DevRun, page: Page) -> None:
    """A forgotten tab is no load on the database: while hidden the dashboard sends no
    request; back in view it refreshes at once; while the API fails it backs off."""
    pg, _ = page
    pg.clock.install()
    asked: list[str] = []
    pending: set[object] = set()  # requests not answered yet
    pg.on("request", lambda r: "/ui" not in r.url and asked.append(r.url))
    pg.on("request", lambda r: pending.add(r))
    pg.on("requestfinished", lambda r: pending.discard(r))
    pg.on("requestfailed", lambda r: pending.discard(r))
    sign_in(pg, dev)
    pg.wait_for_selector("#updated:has-text('updated')")

    def settle() -> None:
        """Let every request in flight be answered, and the page act on the answers,
        before its clock moves on (an answer takes real time: on a loaded machine, more
        than a fake second)."""
        for _ in range(400):
            if not pending:
                break
            pg.wait_for_timeout(25)
        pg.wait_for_timeout(50)

    def after(seconds: int) -> int:
        """Requests sent while the page's clock moves ``seconds`` on, a second at a time,
        each request answered before the next second."""
        settle()
        before = len(asked)
        for _ in range(seconds):
            pg.clock.run_for(1000)
            settle()
        return len(asked) - before

    assert after(11) >= 2  # the overview refreshes every 5 s
    pg.evaluate(
        "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    assert after(60) == 0
    with pg.expect_request(lambda r: r.url.endswith("/stats")):
        pg.evaluate(
            "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
    pg.route("**/stats", lambda route: route.fulfill(status=503, body='{"error":"x"}'))
    # failing: 5, 10, 20, 40 s apart (capped at 60) instead of 15 times, every 5 s
    assert 3 <= after(75) <= 4


def test_a_job_page_links_its_parents_and_children(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    parent = dev.submit({"task": "sleep", "payload": {"seconds": 60}})
    child = dev.submit({"task": "echo", "depends_on": [parent]})
    sign_in(pg, dev)
    pg.goto(f"{dev.url}/ui#/jobs/{child}")
    pg.wait_for_selector("#parents a")
    assert "waiting" in pg.inner_text("#page h1")
    pg.screenshot(path=str(output_dir / "job-waiting.png"), full_page=True)
    pg.click("#parents a")
    pg.wait_for_selector("#children a")
    assert parent in pg.inner_text("#page h1")
    pg.click("#children a")
    pg.wait_for_selector("#parents a")
    assert child in pg.inner_text("#page h1")
    pg.click("#nav a[data-page=jobs]")
    pg.select_option("form.filters select[name=status]", "waiting")
    pg.click("form.filters button[type=submit]")
    pg.wait_for_url(re.compile(r"status=waiting"))
    pg.locator(f"tr[data-job='{child}']").wait_for()
    dev.call("POST", f"/jobs/{parent}/cancel")
    assert csp_violations(watch) == []


def named_key(dev: DevRun, name: str, *scopes: str) -> str:
    status, body = dev.call("POST", "/keys", {"name": name, "scopes": list(scopes)})
    assert status == 201, body
    return str(body["key"])


def test_a_read_key_sees_the_pages_without_the_actions(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    dead = dev.submit({"task": "fail", "payload": {}, "max_retries": 0})
    dev.wait_status(dead, {"dead"})
    sign_in(pg, dev, named_key(dev, f"viewer-{dead[:8]}", "read"))
    pg.wait_for_selector("#nav a[data-page=dlq]", state="visible")
    expect(pg.locator("#whoami")).to_contain_text("(read)")
    pg.click("#nav a[data-page=dlq]")
    rows = pg.locator("#list tr[data-job]")
    rows.first.wait_for()  # dead jobs are listed (this test's, or newer ones)
    assert pg.locator("#list button").count() == 0  # no Replay, no Purge on any of them
    assert pg.get_by_role("button", name="Replay all matching…").count() == 0
    pg.screenshot(path=str(output_dir / "dlq-read-only.png"), full_page=True)
    pg.goto(f"{dev.url}/ui#/jobs/{dead}")
    pg.wait_for_selector("#payload")
    assert pg.locator("#page .actions button").count() == 0
    assert csp_violations(watch) == []


def test_a_refused_page_says_which_scope_it_needs(dev: DevRun, page: Page) -> None:
    pg, _ = page
    name = f"submitter-{dev.submit({'task': 'echo', 'payload': {}})[:8]}"
    sign_in(pg, dev, named_key(dev, name, "submit"))
    flash = pg.locator("#flash")
    expect(flash).to_be_visible()
    expect(flash).to_contain_text(f"the key '{name}' lacks the 'read' scope")
    assert pg.is_visible("#nav")  # signed in: refused, not unknown


def test_the_audit_page_lists_operator_actions_with_their_key(
    dev: DevRun, page: Page, output_dir: Path
) -> None:
    pg, watch = page
    ops = named_key(dev, "ops-audit", "operate", "read")
    dead = dev.submit({"task": "fail", "payload": {}, "max_retries": 0})
    dev.wait_status(dead, {"dead"})
    status, _ = call_as(dev, ops, "DELETE", f"/dlq/{dead}")
    assert status == 204
    sign_in(pg, dev)
    pg.click("#nav a[data-page=audit]")
    row = pg.locator("#audit tr[data-action=purge]").first
    row.wait_for()
    assert "ops-audit" in row.inner_text() and dead in row.inner_text()
    pg.screenshot(path=str(output_dir / "audit.png"), full_page=True)
    assert csp_violations(watch) == []


def call_as(dev: DevRun, key: str, method: str, path: str) -> tuple[int, Any]:
    return request(dev.url, key, method, path)
