"""The dashboard and the docs through API Gateway under its stage prefix: the pages
and their assets load without a key, at the URLs a browser resolves from the page's relative
links, with the security headers; the data calls the page makes still need the key."""

from __future__ import annotations

import re
from urllib.parse import urljoin

import httpx
import pytest

pytestmark = pytest.mark.localstack


def linked(page_url: str, html: str) -> list[str]:
    """The script and stylesheet URLs a browser would load from this page."""
    return [urljoin(page_url, u) for u in re.findall(r'(?:src|href)="([^"#:]+)"', html)]


def test_dashboard_loads_through_api_gateway_without_a_key(api_base: str, api_key: str) -> None:
    with httpx.Client(timeout=60) as anonymous:
        page_url = f"{api_base}/ui"
        page = anonymous.get(page_url)
        assert page.status_code == 200, page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        assets = linked(page_url, page.text)
        assert any(u.endswith("/ui/assets/app.js") for u in assets), assets
        for url in assets:
            assert url.startswith(api_base + "/"), url  # stays under the stage prefix
            if "/ui/assets/" in url:
                reply = anonymous.get(url)
                assert reply.status_code == 200, (url, reply.text[:200])
        # the page's data calls: relative "stats" and "jobs", with and without the key
        stats = urljoin(page_url, "stats")
        assert anonymous.get(stats).status_code in (401, 403)
        assert anonymous.get(urljoin(page_url, "jobs")).status_code in (401, 403)
        signed_in = anonymous.get(stats, headers={"x-api-key": api_key})
        assert signed_in.status_code == 200 and "queues" in signed_in.json()
        series = anonymous.get(urljoin(page_url, "stats/series"), headers={"x-api-key": api_key})
        assert series.status_code == 200 and len(series.json()["minutes"]) == 60


def test_docs_load_through_api_gateway_with_bundled_assets(api_base: str) -> None:
    with httpx.Client(timeout=60) as anonymous:
        page_url = f"{api_base}/docs"
        page = anonymous.get(page_url)
        assert page.status_code == 200, page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        scripts = linked(page_url, page.text)
        assert f"{api_base}/docs/assets/swagger-ui-bundle.js" in scripts
        for url in scripts:
            reply = anonymous.get(url)
            assert reply.status_code == 200, (url, reply.text[:200])
        init = anonymous.get(f"{api_base}/docs/assets/docs.js").text
        spec_url = urljoin(page_url, re.search(r'url: "([^"]+)"', init).group(1))  # type: ignore[union-attr]
        assert spec_url == f"{api_base}/openapi.json"
        spec = anonymous.get(spec_url)
        assert spec.status_code == 200 and "/jobs" in spec.json()["paths"]
