"""Polling until a condition holds, for tests that watch another process work."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 60.0,
    interval: float = 0.1,
    what: str = "condition",
) -> Any:
    """The first truthy value of ``predicate()``; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
