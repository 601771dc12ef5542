"""The retry policy: exponential backoff with full jitter (pure)."""

from __future__ import annotations

import random
from collections.abc import Callable


def backoff_ceiling(attempt: int, base: float, cap: float) -> float:
    """The upper bound of the delay after failed attempt number ``attempt`` (1-based)."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    # 2**n overflows float for huge n; the cap is reached long before 2**64.
    exponent = min(attempt - 1, 64)
    return min(cap, base * (2.0**exponent))


def backoff_delay(
    attempt: int,
    base: float,
    cap: float,
    rand: Callable[[], float] = random.random,
) -> float:
    """Full jitter (AWS Architecture Blog): uniform in ``[0, min(cap, base * 2**(attempt-1))]``."""
    return backoff_ceiling(attempt, base, cap) * rand()
