"""Fault injection for the chaos tests: named crash points, inert unless configured.

``ASYNCZ_CRASH_AT=<point>`` makes the process exit abruptly (``os._exit``, no cleanup, like
a SIGKILL or a Lambda sandbox dying) the first time it reaches that point.
"""

from __future__ import annotations

import os
from functools import lru_cache


@lru_cache(maxsize=1)
def _armed() -> str:
    return os.environ.get("ASYNCZ_CRASH_AT", "")


def crash_point(name: str) -> None:
    """Die here if the chaos tests asked for it; otherwise a cheap no-op."""
    if _armed() == name:
        os._exit(137)
