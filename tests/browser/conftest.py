"""The browser tier: the dashboard in Debian's chromium, driven by Playwright for Python.

Playwright's own browser download cannot be used on these machines, so the tier launches
the system ``chromium`` through ``executable_path`` (``scripts/setup`` installs it with apt
when it can). Without it the tier fails, saying how to install it: it never skips.
Screenshots go to ``.asyncz/browser-output/`` (test output, kept after the run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import API_KEY, HOW_TO, PageWatch, chromium_path
from tests.support.databases import empty_backends
from tests.support.devrun import DevRun, dev_env

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / ".asyncz" / "browser-output"


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the dev extra installs it
        pytest.fail("playwright is not installed: run scripts/setup", pytrace=False)
    from playwright.sync_api import expect

    expect.set_options(timeout=45_000)
    with sync_playwright() as p:
        try:
            chromium = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        except Exception as exc:  # noqa: BLE001 - any launch failure: say how to fix it
            pytest.fail(f"chromium at {executable} did not start ({exc}): {HOW_TO}")
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    """The whole system as ``asyncz dev`` runs it, on a database of this tier's own."""
    database_url, redis_url = empty_backends("browser", 2)
    data = tmp_path_factory.mktemp("browser") / "data"
    run = DevRun(data, dev_env(database_url, redis_url, API_KEY), API_KEY)
    try:
        run.wait_healthy()
        yield run
    finally:
        run.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, PageWatch]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    # generous: a loaded CI box (2 cores, asyncz dev, chromium) is slow, and nothing here
    # asserts a time; the waits only bound how long a broken page takes to fail
    pg.set_default_timeout(45_000)
    yield pg, PageWatch(pg)
    context.close()
