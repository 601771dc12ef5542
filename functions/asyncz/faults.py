"""Fault injection for the chaos tests: named crash and delay points, inert unless
configured.

``ASYNCZ_CRASH_AT=<point>`` makes the process exit abruptly (``os._exit``, no cleanup, like
a SIGKILL or a Lambda sandbox dying) the first time it reaches that point.
``ASYNCZ_DELAY_AT=<point>=<seconds>[,...]`` makes the first arrival at each point wait (a
network or a server that stops answering at the worst moment).
"""

from __future__ import annotations

import asyncio
import os
from functools import lru_cache


@lru_cache(maxsize=1)
def _armed() -> str:
    return os.environ.get("ASYNCZ_CRASH_AT", "")


def crash_point(name: str) -> None:
    """Die here if the chaos tests asked for it; otherwise a cheap no-op."""
    if _armed() == name:
        os._exit(137)


@lru_cache(maxsize=1)
def _delays() -> dict[str, float]:
    spec = os.environ.get("ASYNCZ_DELAY_AT", "")
    points = (item.partition("=") for item in spec.split(",") if item.strip())
    return {name.strip(): float(seconds or 0) for name, _, seconds in points}


_delayed: set[str] = set()


def delays_armed() -> bool:
    """Whether any delay point is configured (callers skip naming their point otherwise)."""
    return bool(_delays())


async def delay_point(name: str) -> None:
    """Wait here once if the chaos tests asked for it; otherwise a cheap no-op."""
    seconds = _delays().get(name)
    if seconds is not None and name not in _delayed:
        _delayed.add(name)
        await asyncio.sleep(seconds)
