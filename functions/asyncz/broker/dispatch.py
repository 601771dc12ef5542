"""What the service hands the broker: a job id and where it belongs (no driver import)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime


def epoch_ms(when: datetime | None = None) -> int:
    return int((when.timestamp() if when is not None else time.time()) * 1000)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One id to put in Redis: in ``ready`` when due, else in ``delayed`` at ``run_at_ms``."""

    job_id: str
    queue: str
    priority: int
    run_at_ms: int
    due: bool
