"""The fleet controller's arithmetic (pure)."""

from __future__ import annotations

import math


def workers_to_start(
    backlog: int, live_workers: int, *, min_workers: int, max_workers: int, jobs_per_worker: int
) -> int:
    """desired = clamp(ceil(backlog / jobs_per_worker), min, max); start desired − live (≥ 0)."""
    desired = math.ceil(max(backlog, 0) / max(jobs_per_worker, 1))
    desired = max(min_workers, min(max_workers, desired))
    return max(0, desired - max(live_workers, 0))
