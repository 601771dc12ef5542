"""The browser tier's helpers: the test key, where chromium is, what a page did that it must
not (:class:`PageWatch`), and signing in to the dashboard."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from tests.support.devrun import DevRun

API_KEY = "browser-test-key"
HOW_TO = (
    "the browser tier needs Debian's chromium: `apt-get install -y chromium` "
    "(scripts/setup does it when run as root with apt), or set ASYNCZ_CHROMIUM to a "
    "Chromium binary"
)


def chromium_path() -> str:
    path = os.environ.get("ASYNCZ_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(f"no chromium found: {HOW_TO}", pytrace=False)
    return path


class PageWatch:
    """What a page did that it must not: dialogs (an XSS alert), console errors (a CSP
    violation is reported there), failed requests."""

    def __init__(self, page: Any) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def csp_violations(watch: PageWatch) -> list[str]:
    return [e for e in watch.errors if "Content Security Policy" in e]


def sign_in(pg: Any, dev: DevRun, key: str = API_KEY) -> None:
    pg.goto(dev.url + "/ui")
    pg.fill("#key", key)
    pg.click("#signin-form button[type=submit]")
    if key == API_KEY:  # signed in (the key checked): only now may the test navigate
        pg.wait_for_selector("#nav a[data-page=jobs]", state="visible")
