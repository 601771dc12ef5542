"""The dashboard, the docs and the chart's series through the api Lambda handler:
pages without a key and with a strict CSP, data only with one, assets from the package."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from asyncz.api import handler as api_handler
from asyncz.api.ui import DOCS_CSP, UI_CSP
from asyncz.connections import hash_api_key
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.settings import Settings
from tests.support.apigw import Reply, call, drop_sandbox
from tests.support.settings import make_settings, open_service

pytestmark = pytest.mark.integration

KEY = "ui-test-key-" + "x" * 20


@pytest.fixture
def settings(clean: None, pg_url: str, redis_server_url: str) -> Settings:
    return make_settings(pg_url, redis_server_url, api_key_hashes=hash_api_key(KEY),
                         wake_worker=False)  # fmt: skip


@pytest.fixture
def api(settings: Settings) -> Iterator[Any]:
    api_handler._sandbox = api_handler.build_sandbox(settings)

    def request(method: str, target: str, key: str | None = None, **kw: Any) -> Reply:
        return call(api_handler.handler, method, target, api_key=key, **kw)

    yield request
    drop_sandbox()


def directives(csp: str) -> dict[str, str]:
    return {d.split()[0]: d.partition(" ")[2] for d in csp.split("; ")}


def test_the_dashboard_is_served_without_a_key_with_a_strict_policy(api: Any) -> None:
    page = api("GET", "/ui")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == UI_CSP
    policy = directives(UI_CSP)
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'" and "unsafe" not in UI_CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.body.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)
    assert not re.search(r"\son\w+=", html), "no inline event handler"
    # every URL is relative, so the page works under API Gateway's stage prefix
    assert not re.search(r'(src|href)="/', html)
    for name, media in (("app.js", "text/javascript"), ("app.css", "text/css")):
        asset = api("GET", f"/ui/assets/{name}")
        assert asset.status == 200 and asset.headers["content-type"].startswith(media)
        assert asset.headers["x-content-type-options"] == "nosniff"
    script = api("GET", "/ui/assets/app.js").body
    assert not re.search(
        rb"(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write|eval\(", script
    )
    assert api("GET", "/ui/").headers["location"] == "../ui"


@pytest.mark.parametrize("path", ["/ui/assets/nope.js", "/ui/assets/..%2F..%2Fsettings.py",
                                  "/docs/assets/index.html", "/ui/assets/",
                                  "/ui/assets/../../jobs", "/docs/assets/../stats"])  # fmt: skip
def test_only_the_shipped_files_are_served(api: Any, path: str) -> None:
    reply = api("GET", path)
    assert reply.status in (401, 404), reply.body
    assert reply.headers["content-type"] == "application/json"


def test_docs_use_bundled_swagger_ui_and_a_relative_schema_url(api: Any) -> None:
    page = api("GET", "/docs")
    assert page.status == 200 and page.headers["content-security-policy"] == DOCS_CSP
    assert "'unsafe-inline'" not in directives(DOCS_CSP)["script-src"]
    html = page.body.decode()
    assert 'src="docs/assets/swagger-ui-bundle.js"' in html and "cdn" not in html.lower()
    init = api("GET", "/docs/assets/docs.js")
    assert init.status == 200 and b'url: "openapi.json"' in init.body
    bundle = api("GET", "/docs/assets/swagger-ui-bundle.js")
    assert bundle.status == 200 and len(bundle.body) > 500_000
    assert api("GET", "/docs/assets/swagger-ui.css").status == 200
    schema = api("GET", "/openapi.json").json()
    assert schema["paths"]["/stats/series"]["get"]["security"] == [{"ApiKey": []}]
    assert "/ui" not in schema["paths"] and "/docs" not in schema["paths"]


def test_data_still_needs_the_key(api: Any) -> None:
    for path in ("/jobs", "/stats", "/stats/series", "/ui/other", "/docs/other"):
        for key in (None, "wrong"):
            reply = api("GET", path, key=key)
            assert reply.status == 401, (path, key, reply.body)
            assert reply.json()["error"] == "unauthorized"


def test_the_series_counts_the_last_hour_per_minute(api: Any, settings: Settings) -> None:
    empty = api("GET", "/stats/series", key=KEY).json()["minutes"]
    assert len(empty) == 60 and all(m["completed"] == m["failed"] == m["dead"] == 0 for m in empty)
    assert [m["minute"] for m in empty] == sorted(m["minute"] for m in empty)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", m["minute"]) for m in empty)

    async def finish_some() -> None:
        async with open_service(settings) as svc:
            for _ in range(3):
                new = NewJob(task="echo", payload={}, max_retries=0, timeout_seconds=30)
                await svc.store.insert_job(str(uuid.uuid4()), new)
            jobs = [j.id for j in (await svc.store.list_jobs(
                status="queued", queue=None, task=None, limit=10, after=None))]  # fmt: skip
            leases = await svc.store.claim(jobs, "w1", 600)
            await svc.store.complete(leases[0], {"ok": True})
            await svc.store.complete(leases[1], {"ok": True})
            await svc.store.finish_failed(leases[2], status=JobStatus.DEAD,
                                          outcome=AttemptOutcome.FAILED, error="x")  # fmt: skip

    asyncio.run(finish_some())
    minutes = api("GET", "/stats/series", key=KEY).json()["minutes"]
    assert len(minutes) == 60
    assert sum(m["completed"] for m in minutes) == 2
    assert sum(m["failed"] for m in minutes) == 1 and sum(m["dead"] for m in minutes) == 1
    assert minutes[-1]["completed"] + minutes[-2]["completed"] == 2  # the current minute(s)
